package dev.ortserve.image;

/**
 * An 8-bit RGB image, row-major with the three channels interleaved (Pillow's mode "RGB").
 */
public record RgbImage(int width, int height, byte[] rgb) {

    public RgbImage {
        if (width < 1 || height < 1 || rgb.length != width * height * 3) {
            throw new IllegalArgumentException("an RGB image of " + width + "x" + height + " needs " + width * height * 3 + " bytes, not " + rgb.length);
        }
    }

    /** The channel {@code c} (0 red, 1 green, 2 blue) of the pixel at ({@code x}, {@code y}), 0-255. */
    public int channel(int x, int y, int c) {
        return rgb[(y * width + x) * 3 + c] & 0xff;
    }
}
