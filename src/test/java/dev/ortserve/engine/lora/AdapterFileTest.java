package dev.ortserve.engine.lora;

import ai.onnxruntime.OrtLoraAdapter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * onnxruntime's adapter file: what onnxruntime's own AdapterFormat wrote (fixtures/lora/qwen3/alpha.onnx_adapter) reads
 * back as the PEFT adapter it was made from converts; what this writer writes reads back unchanged and onnxruntime loads it.
 */
class AdapterFileTest {

    static final Path LORA = Path.of("src/test/resources/fixtures/lora");

    @TempDir
    Path dir;

    @Test
    void readsOnnxRuntimesOwnFileAsThePeftAdapterConverts() throws Exception {
        List<AdapterFile.Parameter> written = AdapterFile.read(LORA.resolve("qwen3/alpha.onnx_adapter"));
        // the graph's LoRA inputs of the qwen3 fixture (hidden 16, 2 heads x 8, 1 kv head, ffn 32), as the rewrite names them
        Map<String, PeftAdapter.Target> targets = new java.util.HashMap<>();
        for (int l = 0; l < 2; l++) {
            targets.put(PeftAdapter.prefix(l, "q_proj"), new PeftAdapter.Target(16, 16, AdapterFile.FLOAT));
            targets.put(PeftAdapter.prefix(l, "k_proj"), new PeftAdapter.Target(16, 8, AdapterFile.FLOAT));
            targets.put(PeftAdapter.prefix(l, "v_proj"), new PeftAdapter.Target(16, 8, AdapterFile.FLOAT));
            targets.put(PeftAdapter.prefix(l, "o_proj"), new PeftAdapter.Target(16, 16, AdapterFile.FLOAT));
            targets.put(PeftAdapter.prefix(l, "gate_proj"), new PeftAdapter.Target(16, 32, AdapterFile.FLOAT));
            targets.put(PeftAdapter.prefix(l, "up_proj"), new PeftAdapter.Target(16, 32, AdapterFile.FLOAT));
            targets.put(PeftAdapter.prefix(l, "down_proj"), new PeftAdapter.Target(32, 16, AdapterFile.FLOAT));
        }
        List<AdapterFile.Parameter> converted = PeftAdapter.convert(LORA.resolve("qwen3/alpha"), targets);
        assertEquals(28, written.size());
        assertEquals(written.size(), converted.size());
        Map<String, AdapterFile.Parameter> byName = new java.util.HashMap<>();
        written.forEach(p -> byName.put(p.name(), p));
        for (AdapterFile.Parameter c : converted) {
            AdapterFile.Parameter w = byName.get(c.name());
            assertArrayEquals(w.dims(), c.dims(), c.name());
            assertEquals(AdapterFile.FLOAT, w.dataType());
            float[] a = floats(w.data()), b = floats(c.data());
            assertArrayEquals(a, b, 1e-6f, c.name());
        }
    }

    @Test
    void writesWhatItReadsAndOnnxRuntimeLoads() throws Exception {
        ByteBuffer data = ByteBuffer.allocate(4 * 6).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 6; i++) data.putFloat(i * 0.5f);
        data.flip();
        List<AdapterFile.Parameter> params = List.of(new AdapterFile.Parameter("a.lora_A.MatMul.weight", new long[] {3, 2}, AdapterFile.FLOAT, data),
                new AdapterFile.Parameter("b", new long[] {2, 0}, AdapterFile.FLOAT, ByteBuffer.allocate(0)));
        Path file = dir.resolve("x.onnx_adapter");
        AdapterFile.write(file, 3, 7, params);
        List<AdapterFile.Parameter> back = AdapterFile.read(file);
        assertEquals(2, back.size());
        assertEquals("a.lora_A.MatMul.weight", back.get(0).name());
        assertArrayEquals(new long[] {3, 2}, back.get(0).dims());
        assertArrayEquals(floats(data), floats(back.get(0).data()));
        assertArrayEquals(new long[] {2, 0}, back.get(1).dims());
        try (OrtLoraAdapter loaded = OrtLoraAdapter.create(file.toString())) {
            assertTrue(loaded != null);
        }
        Files.write(file, new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9});
        assertTrue(assertThrows(java.io.IOException.class, () -> AdapterFile.read(file)).getMessage().contains("not an onnxruntime adapter file"));
    }

    private static float[] floats(ByteBuffer b) {
        float[] out = new float[b.remaining() / 4];
        b.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
        return out;
    }
}
