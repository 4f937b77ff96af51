package dev.ortserve.engine.attention;

/** float16 conversions for tests and benchmarks (JDK 17 has no Float.float16ToFloat), exact as onnxruntime's Cast. */
public final class Half {

    private Half() {
    }

    /** A float16's value, exactly (subnormals included). */
    public static float toFloat(short h) {
        int sign = (h & 0x8000) << 16;
        float magnitude = Float.intBitsToFloat((h & 0x7FFF) << 13) * 0x1.0p112f;
        return Float.intBitsToFloat(Float.floatToRawIntBits(magnitude) | sign);
    }

    /** A float as float16, rounded to nearest even (as onnxruntime's Cast), overflow to infinity, NaN kept. */
    public static short fromFloat(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7FFFFFFF;
        if (abs >= 0x7F800000) return (short) (sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0)); // inf, NaN
        if (abs >= 0x477FF000) return (short) (sign | 0x7C00); // rounds to above 65504
        if (abs < 0x38800000) { // subnormal half (or zero): scale into place and let float rounding do the work
            float scaled = Float.intBitsToFloat(abs) * 0x1.0p24f; // units of 2^-24
            return (short) (sign | Math.round(Math.rint(scaled)));
        }
        int rounded = abs + 0xFFF + ((abs >>> 13) & 1); // round to nearest even on the 13 dropped bits
        return (short) (sign | ((rounded - 0x38000000) >>> 13));
    }
}
