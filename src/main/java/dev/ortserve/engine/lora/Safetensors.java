package dev.ortserve.engine.lora;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A safetensors file (Hugging Face's: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the data), mapped, its float tensors read as float32 (F32, F16 and BF16).
 */
final class Safetensors {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** One tensor: its dtype, shape and bytes (a view of the mapped file). */
    record Tensor(String dtype, long[] shape, ByteBuffer bytes) {
        long elements() {
            long n = 1;
            for (long d : shape) n *= d;
            return n;
        }

        /** Its values as float32, row-major. */
        float[] floats() {
            int n = Math.toIntExact(elements());
            float[] out = new float[n];
            ByteBuffer b = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN);
            switch (dtype) {
                case "F32" -> b.asFloatBuffer().get(out);
                case "F16" -> {
                    for (int i = 0; i < n; i++) out[i] = halfToFloat(b.getShort(i * 2));
                }
                case "BF16" -> {
                    for (int i = 0; i < n; i++) out[i] = Float.intBitsToFloat((b.getShort(i * 2) & 0xffff) << 16);
                }
                default -> throw new IllegalArgumentException("tensor of dtype " + dtype + " (float32, float16 or bfloat16 expected)");
            }
            return out;
        }
    }

    private Safetensors() {
    }

    /** Every tensor of the file, in header order (the file stays mapped while the views are reachable). */
    static Map<String, Tensor> read(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file)) {
            ByteBuffer all = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size()).order(ByteOrder.LITTLE_ENDIAN);
            if (all.capacity() < 8) throw new IOException(file + " is not a safetensors file (shorter than its header length)");
            long headerLength = all.getLong(0);
            if (headerLength <= 0 || headerLength > all.capacity() - 8) throw new IOException(file + " is not a safetensors file (header length " + headerLength + ")");
            byte[] header = new byte[(int) headerLength];
            all.get(8, header);
            JsonNode h = JSON.readTree(header);
            long base = 8 + headerLength;
            Map<String, Tensor> tensors = new LinkedHashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = h.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                if (e.getKey().equals("__metadata__")) continue;
                JsonNode t = e.getValue();
                long[] shape = new long[t.path("shape").size()];
                for (int i = 0; i < shape.length; i++) shape[i] = t.path("shape").get(i).asLong();
                long from = t.path("data_offsets").path(0).asLong(-1), to = t.path("data_offsets").path(1).asLong(-1);
                if (from < 0 || to < from || base + to > all.capacity()) throw new IOException(file + ": tensor " + e.getKey() + " lies outside the file");
                tensors.put(e.getKey(), new Tensor(t.path("dtype").asText(), shape, all.slice((int) (base + from), (int) (to - from))));
            }
            return tensors;
        }
    }

    /** IEEE 754 half to float. */
    static float halfToFloat(short h) {
        int bits = h & 0xffff, sign = (bits & 0x8000) << 16, exp = (bits >>> 10) & 0x1f, mant = bits & 0x3ff;
        if (exp == 0) {
            if (mant == 0) return Float.intBitsToFloat(sign);
            float v = mant / 1024f / 16384f; // subnormal: mant * 2^-24
            return sign != 0 ? -v : v;
        }
        if (exp == 31) return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }
}
