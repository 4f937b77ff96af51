package dev.ortserve.engine.batching;

import dev.ortserve.engine.TextTokenizer;

import java.util.Arrays;

/**
 * Turns a growing list of token ids into text deltas that are final: never half a UTF-8
 * character (a trailing U+FFFD means the bytes are incomplete), never text a later token could
 * rewrite. Decodes a small window (prefix offset to the end) rather than the whole sequence, and
 * starts with a few prompt tokens as context so tokenizers that strip a leading space
 * (SentencePiece) decode the first generated token as they would mid-text. A run of byte-fallback
 * pieces ({@code <0xE4>}...) is held until it ends: a later byte piece can turn the run's complete
 * characters into U+FFFD in the tokenizers library's decode. When the sequence ends,
 * {@link #flush()} gives what was held back (an incomplete character at the very end decodes as
 * U+FFFD, as transformers' and the tokenizers library's decode of the same ids does), so the
 * concatenated deltas equal the decode of all generated ids in the prompt's context.
 */
public final class IncrementalDetokenizer {

    private static final int CONTEXT_TOKENS = 6;

    private final TextTokenizer tokenizer;
    private final boolean skipSpecialTokens;
    private int[] ids;
    private int size;
    private int prefixOffset;
    private int readOffset;

    public IncrementalDetokenizer(TextTokenizer tokenizer, int[] promptIds, boolean skipSpecialTokens) {
        this.tokenizer = tokenizer;
        this.skipSpecialTokens = skipSpecialTokens;
        int context = Math.min(CONTEXT_TOKENS, promptIds.length);
        this.ids = Arrays.copyOfRange(promptIds, promptIds.length - context, promptIds.length + 16);
        this.size = context;
        this.prefixOffset = 0;
        this.readOffset = context;
    }

    /** Adds a token and returns the text that became final (possibly empty). */
    public String add(int tokenId) {
        if (size == ids.length) ids = Arrays.copyOf(ids, ids.length * 2);
        ids[size++] = tokenId;
        // a run of byte-fallback pieces decodes as UTF-8 only if the whole run is valid (else one U+FFFD per
        // byte): its text is final when the run ends
        if (tokenizer.isByteFallback(tokenId)) return "";
        String prefix = prefixOffset == readOffset ? "" : tokenizer.decode(ids, prefixOffset, readOffset, skipSpecialTokens);
        String full = tokenizer.decode(ids, prefixOffset, size, skipSpecialTokens);
        if (full.length() > prefix.length() && !full.endsWith("\uFFFD") && full.startsWith(prefix)) {
            String delta = full.substring(prefix.length());
            prefixOffset = readOffset;
            readOffset = size;
            return delta;
        }
        return "";
    }

    /**
     * The text still held back at the end of the sequence (a character whose last bytes never came,
     * decoded as U+FFFD), or an empty string; the deltas and this concatenated are the decode of all
     * added ids.
     */
    public String flush() {
        if (size == readOffset) return "";
        String prefix = prefixOffset == readOffset ? "" : tokenizer.decode(ids, prefixOffset, readOffset, skipSpecialTokens);
        String full = tokenizer.decode(ids, prefixOffset, size, skipSpecialTokens);
        prefixOffset = readOffset;
        readOffset = size;
        return full.startsWith(prefix) ? full.substring(prefix.length()) : "";
    }
}
