package dev.ortserve.engine;

import java.util.Arrays;

/**
 * The images of a prompt as the decoder takes them: for each image-token position of the prompt
 * (ascending), the row of the vision encoder's output that replaces the token's embedding, in
 * order (the transformers models' {@code masked_scatter}). {@code contentKey} identifies the
 * images' content: prompts whose token ids are equal share cached KV only when their images are
 * the same too.
 *
 * @param positions the prompt positions of the image tokens, ascending
 * @param features  {@code positions.length x hidden} floats, row-major
 */
public record PromptImages(int[] positions, float[] features, int hidden, long contentKey) {

    public PromptImages {
        if (features.length != (long) positions.length * hidden) {
            throw new IllegalArgumentException(positions.length + " image positions need " + (long) positions.length * hidden + " floats, not "
                    + features.length);
        }
        for (int i = 1; i < positions.length; i++) {
            if (positions[i] <= positions[i - 1]) throw new IllegalArgumentException("image positions must ascend");
        }
    }

    /** The index of the first image position at or after {@code position}. */
    public int firstAtOrAfter(int position) {
        int i = Arrays.binarySearch(positions, position);
        return i >= 0 ? i : -i - 1;
    }

    /**
     * The root of the prompt's chain in the prefix cache: apart from every text prompt's (and each
     * LoRA adapter's, whose roots are small negative numbers), one per images' content and adapter.
     */
    public long prefixRoot(int adapterKey) {
        long mixed = contentKey ^ (adapterKey * 0x9E3779B97F4A7C15L);
        return Long.MIN_VALUE + (mixed >>> 2);
    }
}
