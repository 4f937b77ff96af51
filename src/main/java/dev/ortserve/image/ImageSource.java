package dev.ortserve.image;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.Base64;
import java.util.Locale;

/**
 * Where a request's image comes from: its bytes inline (a {@code data:} URL, Anthropic's
 * {@code base64} source) or an http(s) URL to fetch.
 */
public sealed interface ImageSource {

    /** The image sent inline as base64; {@code mediaType} as the client declared it (may be null). */
    record Inline(String base64, String mediaType) implements ImageSource {

        /** The decoded bytes, at most {@code maxBytes} of them (refused before decoding when the text is longer than that). */
        public byte[] bytes(long maxBytes) {
            return decode(base64, maxBytes);
        }
    }

    /** An http(s) URL the server fetches when its settings allow. */
    record Remote(URI uri) implements ImageSource {
    }

    /**
     * The source an {@code image_url} gives: a base64 {@code data:} URL, or an http(s) URL.
     */
    public static ImageSource ofUrl(String url) {
        if (url == null || url.isBlank()) throw new ImageException("The image URL is empty.");
        String trimmed = url.strip();
        String lower = trimmed.toLowerCase(Locale.ROOT);
        if (lower.startsWith("data:")) {
            int comma = trimmed.indexOf(',');
            if (comma < 0) throw new ImageException("The data URL has no ',' before its data.");
            String header = trimmed.substring(5, comma);
            String[] params = header.split(";");
            boolean base64 = params.length > 1 && params[params.length - 1].equalsIgnoreCase("base64");
            if (!base64) throw new ImageException("An image data URL must be base64 encoded (data:image/png;base64,...).");
            String mediaType = params[0].isBlank() ? null : params[0].strip().toLowerCase(Locale.ROOT);
            if (mediaType != null && !mediaType.startsWith("image/")) {
                throw new ImageException("The data URL's media type is '" + mediaType + "', not an image type (image/png, image/jpeg, ...).");
            }
            return new Inline(trimmed.substring(comma + 1), mediaType);
        }
        if (lower.startsWith("http://") || lower.startsWith("https://")) {
            try {
                URI uri = new URI(trimmed);
                if (uri.getHost() == null) throw new ImageException("The image URL has no host.");
                return new Remote(uri);
            } catch (URISyntaxException e) {
                throw new ImageException("The image URL is not a valid URL.");
            }
        }
        throw new ImageException("An image URL must be a data: URL (data:image/png;base64,...) or an http(s) URL.");
    }

    /** Anthropic's {@code base64} source: the data without a {@code data:} prefix, and its media type. */
    public static ImageSource ofBase64(String data, String mediaType) {
        if (data == null || data.isBlank()) throw new ImageException("The image's base64 data is empty.");
        return new Inline(data, mediaType);
    }

    private static byte[] decode(String data, long maxBytes) {
        String clean = data.replaceAll("\\s+", "");
        // 4 characters of base64 hold 3 bytes: refuse before decoding what would be too large
        if (clean.length() / 4L * 3 > maxBytes + 3) {
            throw new ImageException("The image is larger than this server takes (at most " + maxBytes + " bytes per image).");
        }
        try {
            byte[] bytes = Base64.getDecoder().decode(clean);
            if (bytes.length > maxBytes) {
                throw new ImageException("The image is larger than this server takes (at most " + maxBytes + " bytes per image).");
            }
            return bytes;
        } catch (IllegalArgumentException e) {
            throw new ImageException("The image's base64 data is not valid base64.");
        }
    }
}
