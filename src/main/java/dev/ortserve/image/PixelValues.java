package dev.ortserve.image;

/**
 * One image made ready for a vision encoder: its frames' pixel values, float32 channels-first
 * ({@code frames x 3 x height x width}), and the text its placeholder becomes in the prompt.
 *
 * @param promptText  what replaces the image's placeholder in the rendered prompt (the image tokens with their markers)
 * @param imageTokens how many image tokens {@code promptText} holds (one feature row of the encoder's output each)
 */
public record PixelValues(float[] values, int frames, int height, int width, String promptText, int imageTokens) {

    public PixelValues {
        if (values.length != frames * 3 * height * width) throw new IllegalArgumentException("pixel values " + values.length);
    }
}
