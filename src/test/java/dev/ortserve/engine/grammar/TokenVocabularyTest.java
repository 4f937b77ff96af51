package dev.ortserve.engine.grammar;

import dev.ortserve.TinyModelResource;
import dev.ortserve.engine.TextTokenizer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Token bytes for byte-level BPE and SentencePiece vocabularies, and the masks a grammar derives from them. */
class TokenVocabularyTest {

    @Test
    void byteLevelTokensAreTheBytesTheTokenizerDecodesTo() throws Exception {
        Path dir = TinyModelResource.directory();
        try (TextTokenizer tokenizer = TextTokenizer.load(dir.resolve("tokenizer.json"))) {
            TokenVocabulary v = TokenVocabulary.load(dir.resolve("tokenizer.json"), tokenizer.vocabSize(), Set.of(256, 258));
            int checked = 0;
            for (int id = 0; id < tokenizer.vocabSize(); id++) {
                byte[] b = v.bytes(id);
                if (b == null) continue;
                String text = tokenizer.tokenText(id);
                if (text.contains("\uFFFD")) continue; // part of a multi-byte character: no text of its own
                assertArrayEquals(text.getBytes(StandardCharsets.UTF_8), b, "token " + id + " " + text);
                checked++;
            }
            assertTrue(checked > 200, "checked " + checked);
            assertNull(v.bytes(256), "end-of-sequence is never in the trie");
            assertNull(v.bytes(257), "special tokens are never generated under a grammar");
            assertArrayEquals("<tool_call>".getBytes(StandardCharsets.UTF_8), v.bytes(261), "added non-special tokens stand for their text");
        }
    }

    @Test
    void sentencePiecePiecesMapSpacesAndByteFallback(@TempDir Path dir) throws Exception {
        String json = """
                {"added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],
                 "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\u2581"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]},
                 "model":{"type":"BPE","byte_fallback":true,"vocab":{"<unk>":0,"<s>":1,"</s>":2,"<0x0A>":3,"<0x7B>":4,"\u2581{":5,"}":6,"\u2581\\"a\\"":7,":":8,"\u25811":9,"1":10,"<0xC3>":11,"<0xA9>":12}}}
                """;
        Path file = dir.resolve("tokenizer.json");
        Files.writeString(file, json);
        TokenVocabulary v = TokenVocabulary.load(file, 13, Set.of(2));
        assertArrayEquals(new byte[] {'\n'}, v.bytes(3));
        assertArrayEquals(new byte[] {'{'}, v.bytes(4));
        assertArrayEquals(" {".getBytes(StandardCharsets.UTF_8), v.bytes(5));
        assertArrayEquals(" \"a\"".getBytes(StandardCharsets.UTF_8), v.bytes(7));
        assertArrayEquals(new byte[] {(byte) 0xC3}, v.bytes(11));
        assertNull(v.bytes(1));

        // {"a": 1} with whitespace allowed: which tokens may start it, and which may follow '{'
        Nfa nfa = new Nfa();
        Nfa.Frag ws = nfa.repeat(() -> nfa.byteClass(' ', ' ', '\n', '\n'), 0, 4);
        Nfa.Frag grammar = nfa.seq(nfa.literal("{"), ws, nfa.literal("\"a\""), nfa.literal(":"),
                nfa.repeat(() -> nfa.byteClass(' ', ' '), 0, 1), nfa.literal("1"), nfa.literal("}"));
        GrammarConstraint constraint = new GrammarConstraint(new ByteDfa(nfa, grammar), v);
        GrammarConstraint.State state = (GrammarConstraint.State) constraint.start();
        float[] logits = new float[13];
        state.mask(logits);
        assertTrue(logits[4] == 0 && logits[5] == Float.NEGATIVE_INFINITY, "only '{' can start (' {' has a leading space)");
        assertEquals(Float.NEGATIVE_INFINITY, logits[2], "end-of-sequence only when complete");
        state.advance(4);
        logits = new float[13];
        state.mask(logits);
        assertEquals(0f, logits[7], "' \"a\"' after '{'");
        assertEquals(0f, logits[3], "a newline after '{'");
        assertEquals(Float.NEGATIVE_INFINITY, logits[6]);
        for (int t : new int[] {7, 8, 9, 6}) state.advance(t);
        assertTrue(state.accepting());
        logits = new float[13];
        state.mask(logits);
        assertEquals(0f, logits[2], "end-of-sequence once the value is complete");
        for (int i = 0; i < 13; i++) if (i != 2) assertEquals(Float.NEGATIVE_INFINITY, logits[i], "nothing may follow: " + i);
        assertFalse(v.isEos(4));
    }
}
