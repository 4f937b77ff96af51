package dev.ortserve.image;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Decoding and resizing held to Pillow 12.3 byte for byte: fixtures/images holds PNGs (RGB, RGBA, grey) and a JPEG
 * made by scripts/make_images.py, and pil_resize.json the SHA-256 of what Pillow decodes (after convert("RGB")) and of
 * each {@code Image.resize} with the three filters the vision processors use, at sizes down and up
 * (scripts/pil_resize_references.py).
 */
class ResamplerTest {

    private static final String DIR = "/fixtures/images/";

    @Test
    void decodedAndResizedBytesEqualPillows() throws IOException {
        JsonNode index = new ObjectMapper().readTree(getClass().getResourceAsStream(DIR + "pil_resize.json"));
        ImageDecoder decoder = new ImageDecoder(1_000_000);
        List<String> wrong = new ArrayList<>();
        int checked = 0;
        for (JsonNode e : index.path("entries")) {
            RgbImage source = decoder.decode(read(e.path("src").asText()));
            RgbImage image = source;
            if (!e.path("resample").isNull()) {
                Resampler.Filter filter = Resampler.Filter.valueOf(e.path("resample").asText().toUpperCase(Locale.ROOT));
                assertEquals(filter, Resampler.Filter.ofPil(e.path("resample_int").asInt()));
                image = Resampler.resize(source, e.path("size_wh").get(0).asInt(), e.path("size_wh").get(1).asInt(), filter);
            }
            assertEquals(e.path("size_wh").get(0).asInt(), image.width());
            assertEquals(e.path("size_wh").get(1).asInt(), image.height());
            if (!sha256(image.rgb()).equals(e.path("sha256").asText())) wrong.add(e.path("file").asText());
            checked++;
        }
        assertEquals(47, checked);
        assertTrue(wrong.isEmpty(), "differ from Pillow: " + wrong);
    }

    @Test
    void theSameSizeIsTheSameImage() {
        RgbImage image = new RgbImage(2, 1, new byte[] {1, 2, 3, 4, 5, 6});
        assertEquals(image, Resampler.resize(image, 2, 1, Resampler.Filter.BICUBIC));
    }

    private static byte[] read(String name) throws IOException {
        try (InputStream in = ResamplerTest.class.getResourceAsStream(DIR + name)) {
            return in.readAllBytes();
        }
    }

    private static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
