package dev.ortserve.image;

/**
 * Resizes an RGB image exactly as Pillow's {@code Image.resize(size, resample)} does (its
 * {@code Resample.c}): a separable convolution, horizontal pass first, then vertical, whose
 * filter support widens by the scale when shrinking (antialiasing), with the coefficients and
 * sums in Pillow's 22-bit fixed point and each pass rounded and clipped to 8 bits. The Hugging
 * Face image processors resize through Pillow, so the model sees these very bytes.
 */
public final class Resampler {

    /** Pillow's resampling filters (Image.Resampling), with their support. */
    public enum Filter {
        NEAREST(0), BOX(0.5), BILINEAR(1.0), HAMMING(1.0), BICUBIC(2.0), LANCZOS(3.0);

        final double support;

        Filter(double support) {
            this.support = support;
        }

        /** Pillow's number for the filter, as processor configs give {@code resample}. */
        public static Filter ofPil(int resample) {
            return switch (resample) {
                case 0 -> NEAREST;
                case 1 -> LANCZOS;
                case 2 -> BILINEAR;
                case 3 -> BICUBIC;
                case 4 -> BOX;
                case 5 -> HAMMING;
                default -> throw new IllegalArgumentException("Unknown PIL resample filter " + resample);
            };
        }

        double weight(double x) {
            return switch (this) {
                case BOX -> x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
                case BILINEAR -> {
                    double a = Math.abs(x);
                    yield a < 1.0 ? 1.0 - a : 0.0;
                }
                case HAMMING -> {
                    double a = Math.abs(x);
                    if (a == 0.0) yield 1.0;
                    if (a >= 1.0) yield 0.0;
                    a *= Math.PI;
                    yield Math.sin(a) / a * (0.54 + 0.46 * Math.cos(a));
                }
                case BICUBIC -> {
                    double a = Math.abs(x);
                    final double c = -0.5;
                    if (a < 1.0) yield ((c + 2.0) * a - (c + 3.0)) * a * a + 1;
                    if (a < 2.0) yield (((a - 5) * a + 8) * a - 4) * c;
                    yield 0.0;
                }
                case LANCZOS -> -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0;
                case NEAREST -> throw new IllegalStateException("nearest has no weights");
            };
        }

        private static double sinc(double x) {
            if (x == 0.0) return 1.0;
            x *= Math.PI;
            return Math.sin(x) / x;
        }
    }

    private static final int PRECISION_BITS = 32 - 8 - 2;

    private Resampler() {
    }

    /** {@code image} resized to {@code width} x {@code height} with {@code filter}. */
    public static RgbImage resize(RgbImage image, int width, int height, Filter filter) {
        if (width < 1 || height < 1) throw new IllegalArgumentException("size " + width + "x" + height);
        if (width == image.width() && height == image.height()) return image;
        if (filter == Filter.NEAREST) return nearest(image, width, height);
        Coefficients horizontal = Coefficients.of(image.width(), width, filter);
        Coefficients vertical = Coefficients.of(image.height(), height, filter);
        RgbImage in = image;
        int yFirst = 0;
        if (width != image.width()) {
            // only the rows the vertical pass reads
            yFirst = vertical.bounds[0];
            int yLast = vertical.bounds[(height - 1) * 2] + vertical.bounds[(height - 1) * 2 + 1];
            in = horizontal(image, horizontal, yFirst, yLast - yFirst);
        }
        if (height == image.height()) return in;
        return vertical(in, vertical, yFirst);
    }

    private static RgbImage horizontal(RgbImage in, Coefficients c, int yOffset, int rows) {
        int outWidth = c.outSize;
        byte[] src = in.rgb();
        byte[] out = new byte[outWidth * rows * 3];
        for (int y = 0; y < rows; y++) {
            int row = (y + yOffset) * in.width() * 3;
            for (int x = 0; x < outWidth; x++) {
                int min = c.bounds[x * 2];
                int n = c.bounds[x * 2 + 1];
                int k = x * c.kernelSize;
                int s0 = 1 << (PRECISION_BITS - 1);
                int s1 = s0;
                int s2 = s0;
                for (int i = 0; i < n; i++) {
                    int p = row + (min + i) * 3;
                    int w = c.fixed[k + i];
                    s0 += (src[p] & 0xff) * w;
                    s1 += (src[p + 1] & 0xff) * w;
                    s2 += (src[p + 2] & 0xff) * w;
                }
                int o = (y * outWidth + x) * 3;
                out[o] = clip8(s0);
                out[o + 1] = clip8(s1);
                out[o + 2] = clip8(s2);
            }
        }
        return new RgbImage(outWidth, rows, out);
    }

    private static RgbImage vertical(RgbImage in, Coefficients c, int yOffset) {
        int width = in.width();
        byte[] src = in.rgb();
        byte[] out = new byte[width * c.outSize * 3];
        for (int y = 0; y < c.outSize; y++) {
            int min = c.bounds[y * 2] - yOffset;
            int n = c.bounds[y * 2 + 1];
            int k = y * c.kernelSize;
            for (int x = 0; x < width; x++) {
                int s0 = 1 << (PRECISION_BITS - 1);
                int s1 = s0;
                int s2 = s0;
                for (int i = 0; i < n; i++) {
                    int p = ((min + i) * width + x) * 3;
                    int w = c.fixed[k + i];
                    s0 += (src[p] & 0xff) * w;
                    s1 += (src[p + 1] & 0xff) * w;
                    s2 += (src[p + 2] & 0xff) * w;
                }
                int o = (y * width + x) * 3;
                out[o] = clip8(s0);
                out[o + 1] = clip8(s1);
                out[o + 2] = clip8(s2);
            }
        }
        return new RgbImage(width, c.outSize, out);
    }

    private static byte clip8(int v) {
        if (v >= (1 << PRECISION_BITS << 8)) return (byte) 255;
        if (v <= 0) return 0;
        return (byte) (v >> PRECISION_BITS);
    }

    /** Pillow's nearest neighbour: the source pixel under each output pixel's centre. */
    private static RgbImage nearest(RgbImage in, int width, int height) {
        byte[] out = new byte[width * height * 3];
        double sx = (double) in.width() / width;
        double sy = (double) in.height() / height;
        for (int y = 0; y < height; y++) {
            int yy = Math.min(in.height() - 1, (int) ((y + 0.5) * sy));
            for (int x = 0; x < width; x++) {
                int xx = Math.min(in.width() - 1, (int) ((x + 0.5) * sx));
                System.arraycopy(in.rgb(), (yy * in.width() + xx) * 3, out, (y * width + x) * 3, 3);
            }
        }
        return new RgbImage(width, height, out);
    }

    /** Pillow's {@code precompute_coeffs} then {@code normalize_coeffs_8bpc} for one axis. */
    private record Coefficients(int outSize, int kernelSize, int[] bounds, int[] fixed) {

        static Coefficients of(int inSize, int outSize, Filter filter) {
            double scale = (double) inSize / outSize;
            double filterScale = Math.max(scale, 1.0);
            double support = filter.support * filterScale;
            int kernelSize = (int) Math.ceil(support) * 2 + 1;
            int[] bounds = new int[outSize * 2];
            int[] fixed = new int[outSize * kernelSize];
            double[] k = new double[kernelSize];
            for (int xx = 0; xx < outSize; xx++) {
                double center = (xx + 0.5) * scale;
                double ss = 1.0 / filterScale;
                int min = Math.max(0, (int) (center - support + 0.5));
                int max = Math.min(inSize, (int) (center + support + 0.5)) - min;
                double sum = 0.0;
                for (int x = 0; x < max; x++) {
                    double w = filter.weight((x + min - center + 0.5) * ss);
                    k[x] = w;
                    sum += w;
                }
                for (int x = 0; x < max; x++) {
                    double w = sum != 0.0 ? k[x] / sum : k[x];
                    fixed[xx * kernelSize + x] = w < 0 ? (int) (-0.5 + w * (1 << PRECISION_BITS)) : (int) (0.5 + w * (1 << PRECISION_BITS));
                }
                bounds[xx * 2] = min;
                bounds[xx * 2 + 1] = max;
            }
            return new Coefficients(outSize, kernelSize, bounds, fixed);
        }
    }
}
