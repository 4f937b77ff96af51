package dev.ortserve.engine.rewrite;

/** Precision of a decoder's constant MatMul weights as served: as exported, or block-quantized on load. */
public enum WeightPrecision {
    /** As exported (an already quantized model is served as it is). */
    MODEL(0),
    /** 8-bit blocks of 32 (like llama.cpp's Q8_0), onnxruntime's MatMulNBits. */
    INT8(8),
    /** 4-bit blocks of 32 (like llama.cpp's Q4_0), onnxruntime's MatMulNBits. */
    INT4(4);

    public final int bits;

    WeightPrecision(int bits) {
        this.bits = bits;
    }

    public static WeightPrecision parse(String value) {
        for (WeightPrecision p : values()) {
            if (p.name().equalsIgnoreCase(value)) return p;
        }
        throw new IllegalArgumentException("Unknown weight precision '" + value + "' (valid: model, int8, int4)");
    }
}
