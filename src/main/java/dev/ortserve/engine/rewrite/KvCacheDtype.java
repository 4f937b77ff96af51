package dev.ortserve.engine.rewrite;

/** The element type of the KV cache as served: the model's own, or float16 (a graph rewrite on load, {@link HalfKv}). */
public enum KvCacheDtype {
    /** As exported (an fp32 graph keeps fp32 KV, an fp16 export fp16). */
    MODEL,
    /**
     * float16 where attention runs as GroupQueryAttention (as exported or fused on load: {@link HalfKv}), the model's own
     * elsewhere: llama.cpp's default (f16 KV), half the KV bytes per token where the op takes it.
     */
    AUTO,
    /** float16 KV (like vLLM's --kv-cache-dtype, llama.cpp's -ctk/-ctv f16): GroupQueryAttention graphs only; a start error elsewhere. */
    FLOAT16;

    public static KvCacheDtype parse(String value) {
        String v = value == null ? "" : value.trim();
        if (v.equalsIgnoreCase("auto")) return AUTO;
        if (v.equalsIgnoreCase("model")) return MODEL;
        if (v.equalsIgnoreCase("float16") || v.equalsIgnoreCase("fp16") || v.equalsIgnoreCase("f16")) return FLOAT16;
        throw new IllegalArgumentException("Unknown KV cache dtype '" + value + "' (valid: auto, model, float16)");
    }
}
