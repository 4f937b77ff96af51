package dev.ortserve.modelgen;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Writes a Hugging Face `tokenizer.json` for a byte-level BPE vocabulary: ids 0..255 are the
 * bytes (in GPT-2's byte-to-unicode alphabet), 256..262 the added tokens, then the merged
 * tokens, learnt by BPE training on a seeded synthetic English/code/JSON corpus and, where the
 * corpus runs out of pairs before the requested vocabulary size, extended with further merges
 * of existing tokens (each a valid merge: both parts exist, the result is new).
 */
final class ByteLevelBpeTokenizer {

    static final List<String> ADDED = List.of("<|endoftext|>", "<|im_start|>", "<|im_end|>",
            "<think>", "</think>", "<tool_call>", "</tool_call>");
    static final int SPECIAL_COUNT = 3; // the first three are special; the four markers are not (as in Qwen)
    static final int FIRST_ADDED_ID = 256;
    static final int ENDOFTEXT = 256, IM_START = 257, IM_END = 258;
    private static final int MAX_TRAINED_MERGES = 2000;

    private static final Pattern PRETOKEN = Pattern.compile(
            "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");

    private static final String[] WORDS = ("the of and to in is that for it as was with be by on not he this are or his from "
            + "at which but have an they you were her she there been one all we their has would when if so no will can more "
            + "time about what up out them into some then its other than only could new these two may first any like now "
            + "model server token request stream batch engine cache value function return string number object array null "
            + "true false error message user assistant system tool call weather city temperature answer question because "
            + "world hello quick brown fox jumps over lazy dog data result input output json schema type name content "
            + "public class static void int long float double import package private final new list map set get put "
            + "river mountain forest ocean light night morning evening story little great small large house water fire "
            + "think reason step first then finally therefore however example simple complex system memory thread queue")
            .split(" ");

    private static final String[] SNIPPETS = {
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        "def main():\n    print(\"hello world\")\n",
        "for (int i = 0; i < n; i++) {\n    sum += values[i];\n}\n",
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"ortserve\"}}\n</tool_call>",
        "<think>\nLet me think about this step by step.\n</think>\n",
        "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "x = y + 42 * (z - 7) / 3.14;", "https://example.com/path?q=1&r=2",
    };

    private ByteLevelBpeTokenizer() {
    }

    /** GPT-2's reversible map from bytes to printable unicode characters. */
    static char[] byteToUnicode() {
        char[] map = new char[256];
        boolean[] direct = new boolean[256];
        for (int b = '!'; b <= '~'; b++) direct[b] = true;
        for (int b = 0xA1; b <= 0xAC; b++) direct[b] = true;
        for (int b = 0xAE; b <= 0xFF; b++) direct[b] = true;
        int n = 0;
        for (int b = 0; b < 256; b++) {
            if (direct[b]) {
                map[b] = (char) b;
            } else {
                map[b] = (char) (256 + n++);
            }
        }
        return map;
    }

    static String corpus(long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        StringBuilder text = new StringBuilder(64 * 1024);
        while (text.length() < 48 * 1024) {
            int words = 4 + random.nextInt(12);
            for (int w = 0; w < words; w++) {
                String word = WORDS[random.nextInt(WORDS.length)];
                if (w == 0) word = Character.toUpperCase(word.charAt(0)) + word.substring(1);
                text.append(word).append(w == words - 1 ? "" : (random.nextInt(10) == 0 ? ", " : " "));
            }
            text.append(random.nextInt(6) == 0 ? "?\n" : ". ");
            if (random.nextInt(8) == 0) text.append(SNIPPETS[random.nextInt(SNIPPETS.length)]).append('\n');
            if (random.nextInt(10) == 0) text.append(random.nextInt(100000)).append(' ');
        }
        return text.toString();
    }

    /** Learns merges until the vocabulary (bytes + added + merged) reaches {@code vocabSize}. */
    static List<String[]> learnMerges(int vocabSize, long seed) {
        int wanted = vocabSize - FIRST_ADDED_ID - ADDED.size();
        char[] b2u = byteToUnicode();
        Map<List<String>, Integer> words = new HashMap<>();
        Matcher m = PRETOKEN.matcher(corpus(seed));
        while (m.find()) {
            byte[] bytes = m.group().getBytes(java.nio.charset.StandardCharsets.UTF_8);
            List<String> symbols = new ArrayList<>(bytes.length);
            for (byte b : bytes) symbols.add(String.valueOf(b2u[b & 0xFF]));
            words.merge(symbols, 1, Integer::sum);
        }
        List<List<String>> wordList = new ArrayList<>();
        List<Integer> counts = new ArrayList<>();
        words.forEach((w, c) -> { wordList.add(new ArrayList<>(w)); counts.add(c); });
        List<String[]> merges = new ArrayList<>();
        java.util.Set<String> vocab = new java.util.HashSet<>();
        for (char c : b2u) vocab.add(String.valueOf(c));
        // Training recounts pairs each round; past a few thousand merges the small corpus teaches little.
        int trained = Math.min(wanted, MAX_TRAINED_MERGES);
        while (merges.size() < trained) {
            Map<String, Integer> pairCounts = new HashMap<>();
            for (int i = 0; i < wordList.size(); i++) {
                List<String> w = wordList.get(i);
                for (int j = 0; j + 1 < w.size(); j++) {
                    pairCounts.merge(w.get(j) + "\u0000" + w.get(j + 1), counts.get(i), Integer::sum);
                }
            }
            String best = null;
            int bestCount = 1; // a pair seen once teaches nothing
            for (Map.Entry<String, Integer> e : pairCounts.entrySet()) {
                if (e.getValue() > bestCount || (e.getValue() == bestCount && best != null && e.getKey().compareTo(best) < 0)) {
                    best = e.getKey();
                    bestCount = e.getValue();
                }
            }
            if (best == null) break;
            String[] pair = best.split("\u0000", 2);
            String merged = pair[0] + pair[1];
            merges.add(pair);
            vocab.add(merged);
            for (List<String> w : wordList) {
                for (int j = 0; j + 1 < w.size(); j++) {
                    if (w.get(j).equals(pair[0]) && w.get(j + 1).equals(pair[1])) {
                        w.set(j, merged);
                        w.remove(j + 1);
                    }
                }
            }
        }
        // The corpus ran out of pairs: extend with merges of pairs of existing tokens (letters,
        // digits, the space marker and the learnt tokens), in a fixed order.
        List<String> base = new ArrayList<>();
        for (int b = 0; b < 256; b++) {
            char c = b2u[b];
            if (Character.isLetterOrDigit(c) || c == '\u0120') base.add(String.valueOf(c));
        }
        for (String[] merge : merges) base.add(merge[0] + merge[1]);
        for (int i = 0; i < base.size() && merges.size() < wanted; i++) {
            for (int j = 0; j < base.size() && merges.size() < wanted; j++) {
                String merged = base.get(i) + base.get(j);
                if (vocab.add(merged)) {
                    merges.add(new String[] {base.get(i), base.get(j)});
                }
            }
        }
        return merges;
    }

    static ObjectNode tokenizerJson(ObjectMapper json, List<String[]> merges) {
        char[] b2u = byteToUnicode();
        ObjectNode root = json.createObjectNode();
        root.put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        ArrayNode added = root.putArray("added_tokens");
        for (int i = 0; i < ADDED.size(); i++) {
            ObjectNode t = added.addObject();
            t.put("id", FIRST_ADDED_ID + i);
            t.put("content", ADDED.get(i));
            t.put("single_word", false);
            t.put("lstrip", false);
            t.put("rstrip", false);
            t.put("normalized", false);
            t.put("special", i < SPECIAL_COUNT);
        }
        root.putNull("normalizer");
        ObjectNode pre = root.putObject("pre_tokenizer");
        pre.put("type", "ByteLevel");
        pre.put("add_prefix_space", false);
        pre.put("trim_offsets", true);
        pre.put("use_regex", true);
        root.putNull("post_processor");
        ObjectNode decoder = root.putObject("decoder");
        decoder.put("type", "ByteLevel");
        decoder.put("add_prefix_space", true);
        decoder.put("trim_offsets", true);
        decoder.put("use_regex", true);
        ObjectNode model = root.putObject("model");
        model.put("type", "BPE");
        model.putNull("dropout");
        model.putNull("unk_token");
        model.putNull("continuing_subword_prefix");
        model.putNull("end_of_word_suffix");
        model.put("fuse_unk", false);
        model.put("byte_fallback", false);
        model.put("ignore_merges", false);
        Map<String, Integer> vocab = new LinkedHashMap<>();
        for (int b = 0; b < 256; b++) vocab.put(String.valueOf(b2u[b]), b);
        for (int i = 0; i < ADDED.size(); i++) vocab.put(ADDED.get(i), FIRST_ADDED_ID + i);
        int id = FIRST_ADDED_ID + ADDED.size();
        for (String[] merge : merges) vocab.put(merge[0] + merge[1], id++);
        ObjectNode vocabNode = model.putObject("vocab");
        vocab.forEach(vocabNode::put);
        ArrayNode mergesNode = model.putArray("merges");
        for (String[] merge : merges) mergesNode.add(merge[0] + " " + merge[1]);
        return root;
    }
}
