package dev.ortserve.image;

import org.junit.jupiter.api.Test;

import javax.imageio.ImageIO;
import java.awt.image.BufferedImage;
import java.awt.image.IndexColorModel;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

public class ImageDecoderTest {

    private final ImageDecoder decoder = new ImageDecoder(25_000_000);

    @Test
    void losslessFormatsDecodeToTheirExactPixels() throws IOException {
        BufferedImage rgb = new BufferedImage(5, 3, BufferedImage.TYPE_INT_RGB);
        for (int y = 0; y < 3; y++) for (int x = 0; x < 5; x++) rgb.setRGB(x, y, (x * 50) << 16 | (y * 100) << 8 | (x + y) * 20);
        for (String format : new String[] {"png", "bmp"}) {
            RgbImage image = decoder.decode(encode(rgb, format));
            assertEquals(5, image.width(), format);
            assertEquals(3, image.height(), format);
            for (int y = 0; y < 3; y++) {
                for (int x = 0; x < 5; x++) {
                    assertEquals(x * 50, image.channel(x, y, 0), format);
                    assertEquals(y * 100, image.channel(x, y, 1), format);
                    assertEquals((x + y) * 20, image.channel(x, y, 2), format);
                }
            }
        }
    }

    @Test
    void greyIsReplicatedWithoutAGammaCurve() throws IOException {
        // javax.imageio's getRGB would pass grey through a linear colour space (64 -> 136); Pillow replicates the sample
        BufferedImage grey = new BufferedImage(2, 1, BufferedImage.TYPE_BYTE_GRAY);
        grey.getRaster().setSample(0, 0, 0, 64);
        grey.getRaster().setSample(1, 0, 0, 200);
        RgbImage image = decoder.decode(encode(grey, "png"));
        assertArrayEquals(new byte[] {64, 64, 64, (byte) 200, (byte) 200, (byte) 200}, image.rgb());
    }

    @Test
    void alphaIsDroppedNotComposited() throws IOException {
        // Pillow's convert("RGB") of RGBA keeps the colour under a transparent pixel
        BufferedImage rgba = new BufferedImage(1, 1, BufferedImage.TYPE_INT_ARGB);
        rgba.setRGB(0, 0, 0x10_20_40_80);
        RgbImage image = decoder.decode(encode(rgba, "png"));
        assertArrayEquals(new byte[] {0x20, 0x40, (byte) 0x80}, image.rgb());
    }

    @Test
    void aPaletteIsLookedUpAndAGifGivesItsFirstFrame() throws IOException {
        IndexColorModel palette = new IndexColorModel(2, 2, new byte[] {10, (byte) 250}, new byte[] {20, (byte) 240}, new byte[] {30, (byte) 230});
        BufferedImage indexed = new BufferedImage(2, 1, BufferedImage.TYPE_BYTE_BINARY, palette);
        indexed.getRaster().setSample(1, 0, 0, 1);
        for (String format : new String[] {"png", "gif"}) {
            RgbImage image = decoder.decode(encode(indexed, format));
            assertArrayEquals(new byte[] {10, 20, 30, (byte) 250, (byte) 240, (byte) 230}, image.rgb(), format);
        }
    }

    @Test
    void jpegDecodes() throws IOException {
        BufferedImage flat = new BufferedImage(16, 16, BufferedImage.TYPE_INT_RGB);
        for (int y = 0; y < 16; y++) for (int x = 0; x < 16; x++) flat.setRGB(x, y, 0x808080);
        RgbImage image = decoder.decode(encode(flat, "jpeg"));
        assertEquals(16, image.width());
        for (byte b : image.rgb()) assertTrue(Math.abs((b & 0xff) - 128) <= 1);
    }

    @Test
    void aDecompressionBombIsRefusedFromItsHeaderAlone() {
        // 20,000 x 20,000 (1.2 GB of RGB) in a few dozen bytes: refused before a pixel is allocated
        byte[] png = pngHeaderOnly(20_000, 20_000);
        ImageException e = assertThrows(ImageException.class, () -> decoder.decode(png));
        assertTrue(e.getMessage().contains("20000 x 20000 pixels"), e.getMessage());
        assertTrue(e.getMessage().contains("at most 25000000 pixels"), e.getMessage());
    }

    @Test
    void corruptTruncatedAndUnknownBytesAreRefusedWithAMessage() throws IOException {
        byte[] png = encode(new BufferedImage(40, 40, BufferedImage.TYPE_INT_RGB), "png");
        ImageException truncated = assertThrows(ImageException.class, () -> decoder.decode(Arrays.copyOf(png, png.length / 2)));
        assertTrue(truncated.getMessage().contains("corrupt or truncated"), truncated.getMessage());
        ImageException unknown = assertThrows(ImageException.class, () -> decoder.decode("not an image at all".getBytes(StandardCharsets.UTF_8)));
        assertTrue(unknown.getMessage().contains("PNG, JPEG, GIF, BMP or WebP"), unknown.getMessage());
        assertThrows(ImageException.class, () -> decoder.decode(new byte[0]));
    }

    @Test
    void aFormatTheJdkReadsButClientsMayNotSendIsRefused() throws IOException {
        // the JDK reads TIFF; the APIs take PNG, JPEG, GIF and WebP (BMP too, as vLLM's Pillow does)
        ImageException e = assertThrows(ImageException.class, () -> decoder.decode(encode(new BufferedImage(2, 2, BufferedImage.TYPE_INT_RGB), "tiff")));
        assertTrue(e.getMessage().startsWith("Images in TIF"), e.getMessage());
    }

    @Test
    void webpIsReadThroughTheTwelveMonkeysPlugin() {
        // a 1x1 lossless WebP (VP8L) of one opaque pixel, written by libwebp
        byte[] webp = java.util.Base64.getDecoder().decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==");
        RgbImage image = decoder.decode(webp);
        assertEquals(1, image.width());
        assertEquals(1, image.height());
    }

    static byte[] encode(BufferedImage image, String format) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        assertTrue(ImageIO.write(image, format, out), "no writer for " + format);
        return out.toByteArray();
    }

    /** A PNG's signature and IHDR for {@code width} x {@code height} RGB, then one empty IDAT and IEND. */
    public static byte[] pngHeaderOnly(int width, int height) {
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.write(new byte[] {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'});
            ByteArrayOutputStream ihdr = new ByteArrayOutputStream();
            DataOutputStream h = new DataOutputStream(ihdr);
            h.writeInt(width);
            h.writeInt(height);
            h.write(new byte[] {8, 2, 0, 0, 0});
            chunk(out, "IHDR", ihdr.toByteArray());
            Deflater deflater = new Deflater();
            deflater.setInput(new byte[1024]);
            deflater.finish();
            byte[] buffer = new byte[256];
            chunk(out, "IDAT", Arrays.copyOf(buffer, deflater.deflate(buffer)));
            chunk(out, "IEND", new byte[0]);
            return bytes.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void chunk(DataOutputStream out, String type, byte[] data) throws IOException {
        out.writeInt(data.length);
        byte[] t = type.getBytes(StandardCharsets.US_ASCII);
        out.write(t);
        out.write(data);
        CRC32 crc = new CRC32();
        crc.update(t);
        crc.update(data);
        out.writeInt((int) crc.getValue());
    }
}
