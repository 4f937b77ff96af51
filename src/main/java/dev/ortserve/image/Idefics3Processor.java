package dev.ortserve.image;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Idefics3's (SmolVLM's) image processor and prompt expansion, as transformers 5.18's
 * {@code Idefics3ImageProcessorPil} and {@code Idefics3Processor} do them: the image resized
 * (Lanczos) so its longest edge is {@code size.longest_edge} (small images grow too; the other
 * edge even), then resized to multiples of {@code max_image_size.longest_edge}, cut into tiles
 * of that size row by row with the whole image resized to one tile appended last, each frame
 * rescaled (float64, then float32) and normalized (float32), as Pillow and numpy compute them.
 * The prompt's {@code <image>} becomes, per tile, {@code <fake_token_around_image><row_r_col_c>}
 * and {@code image_seq_len} image tokens, a newline after each row, then the global image's.
 */
public final class Idefics3Processor {

    /** transformers' MAX_IMAGE_SIZE: no edge grows past it. */
    private static final int MAX_IMAGE_SIZE = 4096;

    public static final String IMAGE_TOKEN = "<image>";
    private static final String FAKE = "<fake_token_around_image>";
    private static final String GLOBAL = "<global-img>";

    private final int longestEdge;
    private final int tile;
    private final Resampler.Filter filter;
    private final boolean split;
    private final boolean resize;
    private final double rescale;
    private final float[] mean;
    private final float[] std;
    private final int imageSeqLen;

    Idefics3Processor(int longestEdge, int tile, Resampler.Filter filter, boolean split, boolean resize, double rescale, float[] mean, float[] std,
                      int imageSeqLen) {
        this.longestEdge = longestEdge;
        this.tile = tile;
        this.filter = filter;
        this.split = split;
        this.resize = resize;
        this.rescale = rescale;
        this.mean = mean;
        this.std = std;
        this.imageSeqLen = imageSeqLen;
    }

    /**
     * The processor a model's {@code preprocessor_config.json} and {@code image_seq_len} describe
     * (processor_config.json, or the model config's value); a {@link IllegalArgumentException} naming the field that is missing.
     */
    public static Idefics3Processor of(JsonNode preprocessor, int imageSeqLen) {
        int longest = required(preprocessor.path("size").path("longest_edge"), "size.longest_edge");
        int tile = required(preprocessor.path("max_image_size").path("longest_edge"), "max_image_size.longest_edge");
        Resampler.Filter filter = Resampler.Filter.ofPil(preprocessor.path("resample").asInt(1));
        return new Idefics3Processor(longest, tile, filter, preprocessor.path("do_image_splitting").asBoolean(true),
                preprocessor.path("do_resize").asBoolean(true), preprocessor.path("rescale_factor").asDouble(1 / 255.0),
                floats(preprocessor.path("image_mean"), 0.5f), floats(preprocessor.path("image_std"), 0.5f), imageSeqLen);
    }

    /** The frames of {@code image} and the text its placeholder becomes. */
    public PixelValues process(RgbImage image) {
        return process(image, split);
    }

    /**
     * The same, cut into tiles or not whatever the configuration says ({@code tiles} false: the processor's
     * {@code do_image_splitting=False}, one frame of the tile's size).
     */
    public PixelValues process(RgbImage image, boolean tiles) {
        RgbImage resized = image;
        if (resize) {
            int[] size = rescaleToMaxLen(image.height(), image.width(), longestEdge);
            size = scaleBelowUpperBound(size[0], size[1], MAX_IMAGE_SIZE);
            resized = Resampler.resize(image, size[1], size[0], filter);
        }
        java.util.List<RgbImage> frames = new java.util.ArrayList<>();
        int rows = 0;
        int cols = 0;
        if (tiles) {
            RgbImage multiple = resizeForVisionEncoder(resized);
            if (multiple.height() > tile || multiple.width() > tile) {
                rows = (multiple.height() - tile) / tile + 1;
                cols = (multiple.width() - tile) / tile + 1;
                for (int r = 0; r < rows; r++) {
                    for (int c = 0; c < cols; c++) frames.add(crop(multiple, c * tile, r * tile, tile, tile));
                }
                frames.add(Resampler.resize(multiple, tile, tile, filter));
            } else {
                frames.add(multiple);
            }
        } else {
            frames.add(Resampler.resize(resized, tile, tile, filter));
        }
        int height = frames.get(0).height();
        int width = frames.get(0).width();
        float[] values = new float[frames.size() * 3 * height * width];
        int plane = height * width;
        for (int f = 0; f < frames.size(); f++) {
            byte[] rgb = frames.get(f).rgb();
            int base = f * 3 * plane;
            for (int p = 0; p < plane; p++) {
                for (int c = 0; c < 3; c++) {
                    float x = (float) ((rgb[p * 3 + c] & 0xff) * rescale);
                    values[base + c * plane + p] = (x - mean[c]) / std[c];
                }
            }
        }
        return new PixelValues(values, frames.size(), height, width, promptText(rows, cols), frames.size() * imageSeqLen);
    }

    /** {@code replace_image_token}: the tiles' tokens row by row, then the global image's. */
    String promptText(int rows, int cols) {
        String tokens = IMAGE_TOKEN.repeat(imageSeqLen);
        if (rows == 0 && cols == 0) return FAKE + GLOBAL + tokens + FAKE;
        StringBuilder out = new StringBuilder();
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) out.append(FAKE).append("<row_").append(r + 1).append("_col_").append(c + 1).append('>').append(tokens);
            out.append('\n');
        }
        return out.append('\n').append(FAKE).append(GLOBAL).append(tokens).append(FAKE).toString();
    }

    /** {@code _resize_output_size_rescale_to_max_len}: [height, width]. */
    static int[] rescaleToMaxLen(int height, int width, int maxLen) {
        double aspect = (double) width / height;
        if (width >= height) {
            width = maxLen;
            height = (int) (width / aspect);
            if (height % 2 != 0) height++;
        } else {
            height = maxLen;
            width = (int) (height * aspect);
            if (width % 2 != 0) width++;
        }
        return new int[] {Math.max(height, 1), Math.max(width, 1)};
    }

    /** {@code _resize_output_size_scale_below_upper_bound}: [height, width]. */
    static int[] scaleBelowUpperBound(int height, int width, int maxLen) {
        double aspect = (double) width / height;
        if (width >= height && width > maxLen) {
            width = maxLen;
            height = (int) (width / aspect);
        } else if (height > width && height > maxLen) {
            height = maxLen;
            width = (int) (height * aspect);
        }
        return new int[] {Math.max(height, 1), Math.max(width, 1)};
    }

    /** {@code resize_for_vision_encoder}: both edges up to multiples of the tile. */
    private RgbImage resizeForVisionEncoder(RgbImage image) {
        int height = image.height();
        int width = image.width();
        double aspect = (double) width / height;
        if (width >= height) {
            width = ceilTo(width);
            height = ceilTo((int) (width / aspect));
        } else {
            height = ceilTo(height);
            width = ceilTo((int) (height * aspect));
        }
        return Resampler.resize(image, width, height, filter);
    }

    private int ceilTo(int value) {
        return (int) Math.ceil((double) value / tile) * tile;
    }

    private static RgbImage crop(RgbImage image, int x, int y, int width, int height) {
        byte[] out = new byte[width * height * 3];
        for (int r = 0; r < height; r++) System.arraycopy(image.rgb(), ((y + r) * image.width() + x) * 3, out, r * width * 3, width * 3);
        return new RgbImage(width, height, out);
    }

    private static int required(JsonNode node, String field) {
        if (!node.canConvertToInt() || node.asInt() < 1) throw new IllegalArgumentException("preprocessor_config.json needs " + field);
        return node.asInt();
    }

    private static float[] floats(JsonNode node, float fallback) {
        float[] out = {fallback, fallback, fallback};
        if (node.isNumber()) java.util.Arrays.fill(out, (float) node.asDouble());
        if (node.isArray() && node.size() == 3) for (int c = 0; c < 3; c++) out[c] = (float) node.get(c).asDouble();
        return out;
    }
}
