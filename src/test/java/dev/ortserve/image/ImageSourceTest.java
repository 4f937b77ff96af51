package dev.ortserve.image;

import org.junit.jupiter.api.Test;

import java.net.URI;
import java.util.Base64;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ImageSourceTest {

    @Test
    void aBase64DataUrlIsItsBytes() {
        byte[] bytes = {1, 2, 3, 4, 5};
        ImageSource source = ImageSource.ofUrl("data:image/PNG;base64," + Base64.getEncoder().encodeToString(bytes));
        ImageSource.Inline inline = (ImageSource.Inline) source;
        assertEquals("image/png", inline.mediaType());
        assertArrayEquals(bytes, inline.bytes(5));
        // line breaks in the base64 (some clients wrap at 76) are not data
        assertArrayEquals(bytes, ((ImageSource.Inline) ImageSource.ofUrl("data:;base64,AQID\nBAU=")).bytes(5));
    }

    @Test
    void anHttpUrlIsFetchedLater() {
        assertEquals(URI.create("https://example.com/a.png"), ((ImageSource.Remote) ImageSource.ofUrl(" https://example.com/a.png ")).uri());
    }

    @Test
    void whatIsNotAnImageUrlSaysWhatToSend() {
        assertMessage("data:image/png,abc", "base64 encoded");
        assertMessage("data:text/plain;base64,QQ==", "not an image type");
        assertMessage("data:image/png;base64", "no ','");
        assertMessage("file:///etc/passwd", "data: URL");
        assertMessage("ftp://example.com/a.png", "http(s) URL");
        assertMessage("", "empty");
    }

    @Test
    void invalidBase64IsRefusedNotSkipped() {
        ImageSource.Inline inline = (ImageSource.Inline) ImageSource.ofUrl("data:image/png;base64,AQ*D");
        ImageException e = assertThrows(ImageException.class, () -> inline.bytes(100));
        assertTrue(e.getMessage().contains("not valid base64"));
    }

    @Test
    void moreBytesThanTheCapAreRefusedBeforeDecoding() {
        ImageSource.Inline inline = (ImageSource.Inline) ImageSource.ofBase64("A".repeat(4000), "image/png");
        ImageException e = assertThrows(ImageException.class, () -> inline.bytes(1000));
        assertTrue(e.getMessage().contains("at most 1000 bytes"), e.getMessage());
        assertEquals(3000, inline.bytes(3000).length);
    }

    private static void assertMessage(String url, String says) {
        ImageException e = assertThrows(ImageException.class, () -> ImageSource.ofUrl(url));
        assertTrue(e.getMessage().contains(says), url + ": " + e.getMessage());
    }
}
