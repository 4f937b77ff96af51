package dev.ortserve.engine;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/** The model's Hugging Face tokenizer (tokenizer.json through the tokenizers library). */
public final class TextTokenizer implements AutoCloseable {

    private final HuggingFaceTokenizer tokenizer;
    private final Set<Integer> specialIds;
    private final Map<String, Integer> addedTokens;
    private final int vocabSize;
    private final BitSet byteFallback;

    private TextTokenizer(HuggingFaceTokenizer tokenizer, Set<Integer> specialIds, Map<String, Integer> addedTokens, int vocabSize,
                          BitSet byteFallback) {
        this.tokenizer = tokenizer;
        this.specialIds = Set.copyOf(specialIds);
        this.addedTokens = Map.copyOf(addedTokens);
        this.vocabSize = vocabSize;
        this.byteFallback = byteFallback;
    }

    /**
     * Makes DJL use the CPU build of its tokenizer library bundled in the jar. On a host with
     * CUDA, DJL otherwise looks for a CUDA build of it and tries to download one from
     * publish.djl.ai, which fails on machines without internet access (a GPU pod, say): the
     * tokenizer never needs the GPU. An explicit RUST_FLAVOR (environment or system property) wins.
     */
    public static void useBundledNativeLibrary() {
        if (System.getenv("RUST_FLAVOR") == null && System.getProperty("RUST_FLAVOR") == null) {
            System.setProperty("RUST_FLAVOR", "cpu");
        }
    }

    public static TextTokenizer load(Path tokenizerJson) throws IOException {
        JsonNode root = new ObjectMapper().readTree(tokenizerJson.toFile());
        Set<Integer> special = new HashSet<>();
        Map<String, Integer> added = new HashMap<>();
        int maxId = -1;
        for (JsonNode t : root.path("added_tokens")) {
            int id = t.path("id").asInt();
            added.put(t.path("content").asText(), id);
            if (t.path("special").asBoolean()) special.add(id);
            maxId = Math.max(maxId, id);
        }
        JsonNode vocab = root.path("model").path("vocab");
        boolean fallback = root.path("model").path("byte_fallback").asBoolean(false);
        BitSet bytePieces = new BitSet();
        if (vocab.isObject()) {
            for (var e : (Iterable<Map.Entry<String, JsonNode>>) vocab::fields) {
                maxId = Math.max(maxId, e.getValue().asInt());
                if (fallback && isBytePiece(e.getKey())) bytePieces.set(e.getValue().asInt());
            }
        } else if (vocab.isArray()) {
            maxId = Math.max(maxId, vocab.size() - 1); // Unigram: [[piece, score], ...]
            for (int i = 0; fallback && i < vocab.size(); i++) if (isBytePiece(vocab.get(i).path(0).asText())) bytePieces.set(i);
        }
        useBundledNativeLibrary();
        // The chat template decides about BOS; never add special tokens implicitly. No truncation: the engine
        // checks prompt lengths against the context itself (and DJL warns about an unset maxLength otherwise).
        HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.newInstance(tokenizerJson,
                Map.of("addSpecialTokens", "false", "truncation", "false", "modelMaxLength", String.valueOf(Integer.MAX_VALUE)));
        return new TextTokenizer(tokenizer, special, added, maxId + 1, bytePieces);
    }

    private static boolean isBytePiece(String piece) {
        return piece.length() == 6 && piece.startsWith("<0x") && piece.endsWith(">")
                && Character.digit(piece.charAt(3), 16) >= 0 && Character.digit(piece.charAt(4), 16) >= 0;
    }

    /**
     * Whether the id is a byte-fallback piece ({@code <0xHH>} of a SentencePiece-style tokenizer with
     * {@code byte_fallback}). The tokenizers library decodes a run of them as UTF-8 when the whole run is
     * valid and as one U+FFFD per byte otherwise, so a later byte piece can turn characters already
     * complete into replacement characters.
     */
    public boolean isByteFallback(int id) {
        return byteFallback.get(id);
    }

    /** Tokenizes text; special tokens written in the text are recognised as single tokens. */
    public int[] encode(String text) {
        return encode(text, false);
    }

    /** With {@code addSpecialTokens}, the tokenizer's post-processor adds what it adds (e.g. a BOS). */
    public int[] encode(String text, boolean addSpecialTokens) {
        long[] ids = tokenizer.encode(text, addSpecialTokens, false).getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) out[i] = (int) ids[i];
        return out;
    }

    public String decode(int[] ids, boolean skipSpecialTokens) {
        return decode(ids, 0, ids.length, skipSpecialTokens);
    }

    public String decode(int[] ids, int from, int to, boolean skipSpecialTokens) {
        long[] longs = new long[to - from];
        for (int i = from; i < to; i++) longs[i - from] = ids[i];
        return tokenizer.decode(longs, skipSpecialTokens);
    }

    /** The text of one token decoded alone, special tokens kept. */
    public String tokenText(int id) {
        return tokenizer.decode(new long[] {id}, false);
    }

    public boolean isSpecial(int id) {
        return specialIds.contains(id);
    }

    public Integer addedTokenId(String content) {
        return addedTokens.get(content);
    }

    /** The text of every added token (the markers a model's formats use). */
    public Set<String> addedTokens() {
        return addedTokens.keySet();
    }

    /** One more than the largest id the tokenizer knows. */
    public int vocabSize() {
        return vocabSize;
    }

    @Override
    public void close() {
        tokenizer.close();
    }
}
