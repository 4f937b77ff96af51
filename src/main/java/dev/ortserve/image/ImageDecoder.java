package dev.ortserve.image;

import javax.imageio.ImageIO;
import javax.imageio.ImageReader;
import javax.imageio.stream.ImageInputStream;
import java.awt.color.ColorSpace;
import java.awt.image.BufferedImage;
import java.awt.image.ColorModel;
import java.awt.image.ComponentColorModel;
import java.awt.image.DirectColorModel;
import java.awt.image.Raster;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Iterator;
import java.util.Locale;
import java.util.Set;

/**
 * Decodes an image's bytes into {@link RgbImage} as Pillow's {@code Image.open(...).convert("RGB")}
 * does: the first frame, alpha dropped (not composited), grey replicated, a palette looked up,
 * 16-bit samples cut to their high byte. javax.imageio reads PNG, JPEG, GIF and BMP; TwelveMonkeys'
 * plugins on the class path add WebP and read JPEGs the JDK refuses.
 *
 * <p>The size is read from the header before any pixel is decoded, so an image past
 * {@code maxPixels} (a decompression bomb: a few kilobytes of PNG that inflate to gigabytes) is
 * refused without allocating it.
 */
public final class ImageDecoder {

    /** The formats a client may send, by the names javax.imageio gives them. */
    public static final Set<String> FORMATS = Set.of("png", "jpeg", "gif", "bmp", "webp");

    static {
        // the plugins in the application's jars (TwelveMonkeys' WebP), whichever class loader first touched ImageIO
        ImageIO.scanForPlugins();
    }

    private final long maxPixels;

    public ImageDecoder(long maxPixels) {
        if (maxPixels < 1) throw new IllegalArgumentException("maxPixels " + maxPixels);
        this.maxPixels = maxPixels;
    }

    /** The image {@code bytes} hold; an {@link ImageException} that says why when they hold none this server reads. */
    public RgbImage decode(byte[] bytes) {
        if (bytes.length == 0) throw new ImageException("The image is empty.");
        try (ImageInputStream stream = ImageIO.createImageInputStream(new ByteArrayInputStream(bytes))) {
            Iterator<ImageReader> readers = ImageIO.getImageReaders(stream);
            if (!readers.hasNext()) {
                throw new ImageException("The image is not in a format this server reads (send PNG, JPEG, GIF, BMP or WebP).");
            }
            ImageReader reader = readers.next();
            try {
                String format = reader.getFormatName().toLowerCase(Locale.ROOT);
                if (!FORMATS.contains(format)) {
                    throw new ImageException("Images in " + format.toUpperCase(Locale.ROOT)
                            + " are not supported (send PNG, JPEG, GIF, BMP or WebP).");
                }
                reader.setInput(stream, true, true);
                long width = reader.getWidth(0);
                long height = reader.getHeight(0);
                if (width < 1 || height < 1) throw new ImageException("The image has no pixels.");
                if (width * height > maxPixels) {
                    throw new ImageException("The image is " + width + " x " + height + " pixels; this server takes at most " + maxPixels
                            + " pixels per image (send a smaller image).");
                }
                return rgb(reader.read(0));
            } finally {
                reader.dispose();
            }
        } catch (ImageException e) {
            throw e;
        } catch (IOException | RuntimeException | OutOfMemoryError e) {
            throw new ImageException("The image could not be decoded: its data is corrupt or truncated.");
        }
    }

    /** Pillow's conversion to RGB of what javax.imageio decoded. */
    static RgbImage rgb(BufferedImage image) {
        int width = image.getWidth();
        int height = image.getHeight();
        byte[] out = new byte[width * height * 3];
        ColorModel model = image.getColorModel();
        Raster raster = image.getRaster();
        int type = model.getColorSpace().getType();
        boolean components = model instanceof ComponentColorModel || model instanceof DirectColorModel;
        if (components && (type == ColorSpace.TYPE_RGB || type == ColorSpace.TYPE_GRAY)) {
            boolean grey = type == ColorSpace.TYPE_GRAY;
            int[] shift = new int[3];
            for (int c = 0; c < 3; c++) shift[c] = Math.max(0, model.getComponentSize(grey ? 0 : c) - 8);
            int[] pixel = new int[raster.getNumBands()];
            for (int y = 0; y < height; y++) {
                for (int x = 0; x < width; x++) {
                    raster.getPixel(x, y, pixel);
                    int o = (y * width + x) * 3;
                    for (int c = 0; c < 3; c++) out[o + c] = (byte) (pixel[grey ? 0 : c] >>> shift[c]);
                }
            }
        } else {
            // a palette (its entries are exact), or another colour space: the colour model's sRGB
            for (int y = 0; y < height; y++) {
                for (int x = 0; x < width; x++) {
                    int argb = image.getRGB(x, y);
                    int o = (y * width + x) * 3;
                    out[o] = (byte) (argb >> 16);
                    out[o + 1] = (byte) (argb >> 8);
                    out[o + 2] = (byte) argb;
                }
            }
        }
        return new RgbImage(width, height, out);
    }
}
