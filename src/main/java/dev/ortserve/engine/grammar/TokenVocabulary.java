package dev.ortserve.engine.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/**
 * The bytes every token stands for, read from the model's tokenizer.json (byte-level BPE: the
 * GPT-2 byte-to-character table inverted; SentencePiece: '▁' is a space and {@code <0xAB>}
 * pieces are single bytes), arranged in a byte trie so that the tokens allowed from an automaton
 * state are found by one walk that abandons every prefix the automaton rejects. Special tokens
 * and the end-of-sequence tokens are never part of the trie.
 */
public final class TokenVocabulary {

    private final int size;
    private final byte[][] bytes;
    private final int[] eos;
    // trie in arrays: children of a node are a linked list
    int[] firstChild;
    int[] nextSibling;
    int[] label;
    int[] tokenAt;       // a token ending at this node, or -1
    int[] moreTokensAt;  // index into extra lists for several tokens with the same bytes, or -1
    int[][] extraTokens;
    int nodes;

    private TokenVocabulary(byte[][] bytes, int[] eos) {
        this.size = bytes.length;
        this.bytes = bytes;
        this.eos = eos;
        buildTrie();
    }

    public int size() {
        return size;
    }

    /** The bytes of a token, or null for a token that is never allowed under a grammar. */
    public byte[] bytes(int token) {
        return token >= 0 && token < size ? bytes[token] : null;
    }

    public int[] eosIds() {
        return eos;
    }

    public boolean isEos(int token) {
        for (int e : eos) if (e == token) return true;
        return false;
    }

    public static TokenVocabulary load(Path tokenizerJson, int vocabSize, Set<Integer> eosIds) throws IOException {
        JsonNode root = new ObjectMapper().readTree(tokenizerJson.toFile());
        byte[][] bytes = new byte[vocabSize][];
        boolean byteLevel = root.path("decoder").toString().contains("ByteLevel") || root.path("pre_tokenizer").toString().contains("ByteLevel");
        Map<Character, Integer> unicodeToByte = byteLevel ? unicodeToByte() : Map.of();
        JsonNode vocab = root.path("model").path("vocab");
        if (vocab.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = vocab.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                int id = e.getValue().asInt();
                if (id >= 0 && id < vocabSize) bytes[id] = byteLevel ? byteLevel(e.getKey(), unicodeToByte) : piece(e.getKey());
            }
        } else if (vocab.isArray()) {
            for (int id = 0; id < vocab.size() && id < vocabSize; id++) bytes[id] = piece(vocab.get(id).get(0).asText());
        }
        for (JsonNode t : root.path("added_tokens")) {
            int id = t.path("id").asInt();
            if (id < 0 || id >= vocabSize) continue;
            bytes[id] = t.path("special").asBoolean() ? null : t.path("content").asText().getBytes(StandardCharsets.UTF_8);
        }
        int[] eos = eosIds.stream().mapToInt(Integer::intValue).toArray();
        for (int e : eos) if (e >= 0 && e < vocabSize) bytes[e] = null;
        return new TokenVocabulary(bytes, eos);
    }

    /** For tests and generated vocabularies: the bytes of each token id directly. */
    public static TokenVocabulary of(byte[][] bytes, int[] eos) {
        byte[][] copy = Arrays.copyOf(bytes, bytes.length);
        for (int e : eos) if (e >= 0 && e < copy.length) copy[e] = null;
        return new TokenVocabulary(copy, eos);
    }

    private static byte[] byteLevel(String token, Map<Character, Integer> table) {
        byte[] out = new byte[token.length()];
        for (int i = 0; i < token.length(); i++) {
            Integer b = table.get(token.charAt(i));
            if (b == null) return null; // not a byte-level token: never allowed
            out[i] = (byte) (int) b;
        }
        return out;
    }

    private static byte[] piece(String token) {
        if (token.length() == 6 && token.startsWith("<0x") && token.endsWith(">")) {
            try {
                return new byte[] {(byte) Integer.parseInt(token.substring(3, 5), 16)};
            } catch (NumberFormatException notAByte) {
                // an ordinary piece that happens to look like one
            }
        }
        return token.replace('\u2581', ' ').getBytes(StandardCharsets.UTF_8);
    }

    /** GPT-2's table: printable bytes stand for themselves, the others for 256 + n. */
    private static Map<Character, Integer> unicodeToByte() {
        Map<Character, Integer> table = new HashMap<>();
        int n = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            table.put(printable ? (char) b : (char) (256 + n++), b);
        }
        return table;
    }

    private void buildTrie() {
        int capacity = 1024;
        firstChild = new int[capacity];
        nextSibling = new int[capacity];
        label = new int[capacity];
        tokenAt = new int[capacity];
        moreTokensAt = new int[capacity];
        extraTokens = new int[0][];
        nodes = 1;
        firstChild[0] = -1;
        nextSibling[0] = -1;
        tokenAt[0] = -1;
        moreTokensAt[0] = -1;
        Map<Integer, int[]> extras = new HashMap<>();
        for (int id = 0; id < size; id++) {
            byte[] b = bytes[id];
            if (b == null || b.length == 0) continue;
            int node = 0;
            for (byte x : b) {
                int c = x & 0xFF;
                int child = firstChild[node];
                while (child >= 0 && label[child] != c) child = nextSibling[child];
                if (child < 0) {
                    if (nodes == firstChild.length) grow();
                    child = nodes++;
                    label[child] = c;
                    firstChild[child] = -1;
                    tokenAt[child] = -1;
                    moreTokensAt[child] = -1;
                    nextSibling[child] = firstChild[node];
                    firstChild[node] = child;
                }
                node = child;
            }
            if (tokenAt[node] < 0) {
                tokenAt[node] = id;
            } else {
                int[] list = extras.getOrDefault(node, new int[0]);
                list = Arrays.copyOf(list, list.length + 1);
                list[list.length - 1] = id;
                extras.put(node, list);
            }
        }
        extraTokens = new int[extras.size()][];
        int k = 0;
        for (Map.Entry<Integer, int[]> e : extras.entrySet()) {
            moreTokensAt[e.getKey()] = k;
            extraTokens[k++] = e.getValue();
        }
    }

    private void grow() {
        int n = firstChild.length * 2;
        firstChild = Arrays.copyOf(firstChild, n);
        nextSibling = Arrays.copyOf(nextSibling, n);
        label = Arrays.copyOf(label, n);
        tokenAt = Arrays.copyOf(tokenAt, n);
        moreTokensAt = Arrays.copyOf(moreTokensAt, n);
    }
}
