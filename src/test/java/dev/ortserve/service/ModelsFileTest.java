package dev.ortserve.service;

import dev.ortserve.engine.ModelLoadException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** ORTSERVE_MODELS_FILE as docs/models.md describes it, and every mistake named with the file, the entry and the key. */
class ModelsFileTest {

    @TempDir
    Path dir;

    private List<ModelEntry> read(String text) throws IOException {
        Path file = dir.resolve("models.yaml");
        Files.writeString(file, text);
        return ModelsFile.read(file);
    }

    private String refusal(String text) {
        return assertThrows(ModelLoadException.class, () -> read(text)).getMessage();
    }

    @Test
    void readsTheDocumentedExample() throws IOException {
        List<ModelEntry> entries = read("""
                models:
                  - id: qwen3
                    aliases: [gpt-4o-mini, sonnet]
                    path: onnx-community/Qwen3-0.6B-ONNX
                    file: onnx/model_q4.onnx
                    pinned: true
                    tool_call_parser: hermes
                    reasoning_parser: qwen3
                  - id: llama
                    path: /models/Llama-3.2-1B-Instruct
                    weight_precision: int4
                    max_model_len: 8192
                    kv_cache_bytes: 512M
                    keep_alive: 10m
                  - id: agent
                    path: generated:agent
                """);
        assertEquals(3, entries.size());
        ModelEntry qwen = entries.get(0);
        assertEquals(List.of("qwen3", "gpt-4o-mini", "sonnet"), qwen.names());
        assertTrue(qwen.pinned());
        assertEquals("onnx/model_q4.onnx", qwen.file());
        assertEquals("hermes", qwen.toolCallParser());
        ModelEntry llama = entries.get(1);
        assertFalse(llama.pinned());
        assertEquals(8192, llama.maxModelLen());
        assertEquals(512L << 20, llama.kvCacheBytes());
        assertEquals(Duration.ofMinutes(10), llama.keepAlive().duration());
        assertEquals("int4", llama.weightPrecision());
        assertNull(entries.get(2).keepAlive(), "the server's default");
    }

    @Test
    void jsonIsAModelsFileToo() throws IOException {
        assertEquals("a", read("{\"models\": [{\"id\": \"a\", \"path\": \"/m\", \"keep_alive\": -1}]}").get(0).id());
        assertTrue(read("{\"models\": [{\"id\": \"a\", \"path\": \"/m\", \"keep_alive\": -1}]}").get(0).keepAlive().forever());
    }

    @Test
    void namesEveryMistake() {
        assertTrue(refusal("models:\n  - id: a\n    path: /m\n    pined: true\n").contains("models[0]: unknown key 'pined'"));
        assertTrue(refusal("models:\n  - path: /m\n").contains("models[0]: 'id' is required"));
        assertTrue(refusal("models:\n  - id: a\n").contains("'path' is required"));
        assertTrue(refusal("models:\n  - {id: a, path: /m, aliases: [b]}\n  - {id: b, path: /n}\n").contains("models[1]: the name 'b' is already given"));
        assertTrue(refusal("models:\n  - {id: a, path: /m, keep_alive: soon}\n").contains("models[0]: 'keep_alive' must be a duration"));
        assertTrue(refusal("models:\n  - {id: a, path: /m, max_model_len: -5}\n").contains("'max_model_len' must be a positive whole number"));
        assertTrue(refusal("models:\n  - {id: a, path: /m, kv_cache_bytes: lots}\n").contains("'kv_cache_bytes' must be a size"));
        assertTrue(refusal("models:\n  - {id: a, path: /m, pinned: yes please}\n").contains("'pinned' must be true or false"));
        assertTrue(refusal("models: []\n").contains("lists no model"));
        assertTrue(refusal("model:\n  - {id: a, path: /m}\n").contains("expected an object with a list 'models'"));
        assertTrue(refusal("models:\n  - {id: a, path: /m}\nextra: 1\n").contains("unknown key 'extra'"));
    }

    @Test
    void embeddingModelsTakeTheirFewKeys() throws IOException {
        List<ModelEntry> entries = read("""
                models:
                  - {id: chat, path: /m}
                  - {id: minilm, kind: embedding, aliases: [text-embedding-3-small], path: bundled:all-minilm-l6-v2}
                """);
        assertEquals(ModelEntry.Kind.GENERATION, entries.get(0).kind());
        assertEquals(ModelEntry.Kind.EMBEDDING, entries.get(1).kind());
        assertTrue(entries.get(1).pinned(), "loaded at start, never unloaded");
        assertTrue(refusal("models:\n  - {id: e, kind: embedding, path: /e, keep_alive: 5m}\n")
                .contains("'keep_alive' is not for an embedding model"));
        assertTrue(refusal("models:\n  - {id: e, kind: reranker, path: /e}\n").contains("'kind' must be generation or embedding"));
        assertTrue(refusal("models:\n  - {id: a, path: /m}\n  - {id: a, kind: embedding, path: /e}\n").contains("the name 'a' is already given"));
    }

    @Test
    void keepAliveHasOllamasSemantics() {
        assertEquals(Duration.ofMinutes(5), KeepAlive.parse("5m").duration());
        assertEquals(Duration.ofSeconds(300), KeepAlive.parse("300").duration());
        assertEquals(Duration.ofMinutes(90), KeepAlive.parse("1h30m").duration());
        assertEquals(Duration.ofMillis(1500), KeepAlive.parse("1.5s").duration());
        assertEquals(Duration.ZERO, KeepAlive.parse("0").duration());
        assertTrue(KeepAlive.parse("-1").forever());
        assertTrue(KeepAlive.parse("-1m").forever());
        assertThrows(IllegalArgumentException.class, () -> KeepAlive.parse(""));
        assertThrows(IllegalArgumentException.class, () -> KeepAlive.parse("5 minutes"));
        assertThrows(IllegalArgumentException.class, () -> KeepAlive.parse("m5"));
    }

    @Test
    void adaptersAreListedUnderTheirModelWithNamesOfTheirOwn() throws IOException {
        List<ModelEntry> entries = read("""
                models:
                  - id: qwen3
                    path: /models/qwen3
                    adapters:
                      - id: qwen3-sql
                        path: /adapters/sql
                      - id: qwen3-tone
                        path: /adapters/tone.onnx_adapter
                """);
        assertEquals(List.of(new ModelEntry.Adapter("qwen3-sql", Path.of("/adapters/sql")), new ModelEntry.Adapter("qwen3-tone",
                Path.of("/adapters/tone.onnx_adapter"))), entries.get(0).adapters());
        assertTrue(refusal("""
                models:
                  - id: qwen3
                    path: /m
                    adapters:
                      - {id: qwen3, path: /a}
                """).contains("adapter name 'qwen3' is already given"));
        assertTrue(refusal("""
                models:
                  - id: qwen3
                    path: /m
                    adapters:
                      - {id: sql, path: /a, scale: 2}
                """).contains("models[0].adapters[0]: unknown key 'scale' (known: id, path)"));
        assertTrue(refusal("""
                models:
                  - id: qwen3
                    path: /m
                    adapters: /a
                """).contains("'adapters' must be a list of {id, path}"));
        assertTrue(refusal("""
                models:
                  - id: e
                    kind: embedding
                    path: /m
                    adapters: []
                """).contains("'adapters' is not for an embedding model"));
        assertEquals(List.of(new ModelEntry.Adapter("sql", Path.of("/a/sql")), new ModelEntry.Adapter("tone", Path.of("t.onnx_adapter"))),
                ModelsFile.loraModules(List.of("sql=/a/sql", " tone = t.onnx_adapter")));
        assertTrue(assertThrows(ModelLoadException.class, () -> ModelsFile.loraModules(List.of("sql"))).getMessage().contains("'sql' is not name=path"));
        assertTrue(assertThrows(ModelLoadException.class, () -> ModelsFile.loraModules(List.of("a=/x", "a=/y"))).getMessage().contains("given twice"));
    }
}
