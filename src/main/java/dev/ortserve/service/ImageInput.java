package dev.ortserve.service;

import dev.ortserve.image.ImageException;
import dev.ortserve.image.ImageSource;
import dev.ortserve.service.error.InvalidRequestException;

import java.util.List;

/**
 * An image a chat turn brings, in the order the prompt shows it: where it comes from and the
 * request field that gave it (named in its errors). Each protocol maps its own image part (chat
 * completions' {@code image_url}, Responses' {@code input_image}, Anthropic's {@code image} block)
 * to one; the chat template sees a {@code {"type": "image"}} part in its place.
 *
 * @param lowDetail OpenAI's {@code detail: low}: one frame at the processor's base resolution
 */
public record ImageInput(ImageSource source, String param, boolean lowDetail) {

    /** An {@code image_url}: a base64 data: URL or an http(s) URL; a 400 on {@code param} when it is neither. */
    public static ImageInput ofUrl(String url, String param) {
        return ofUrl(url, null, param);
    }

    /**
     * The same with OpenAI's {@code detail}: {@code low} reads the image at the processor's base resolution, one frame
     * without tiles (Idefics3: 64 image tokens instead of up to 13 x 64); {@code auto}, {@code high} or none as the processor
     * is configured.
     */
    public static ImageInput ofUrl(String url, String detail, String param) {
        try {
            return new ImageInput(ImageSource.ofUrl(url), param, "low".equals(detail));
        } catch (ImageException e) {
            throw new InvalidRequestException(param, e.getMessage());
        }
    }

    /** Base64 data with its media type (Anthropic's {@code base64} source). */
    public static ImageInput ofBase64(String data, String mediaType, String param) {
        try {
            return new ImageInput(ImageSource.ofBase64(data, mediaType), param, false);
        } catch (ImageException e) {
            throw new InvalidRequestException(param, e.getMessage());
        }
    }

    /**
     * Refuses images on a model that takes text only, naming the model and the first image's field:
     * before any model work, whatever else the request holds.
     */
    public static void requireImageModel(ServedModel served, List<ImageInput> images) {
        if (!images.isEmpty() && !served.takesImages()) {
            throw new InvalidRequestException(images.get(0).param(), "The model '" + served.id() + "' takes text only and cannot read images: "
                    + "remove the image parts, or send them to a model that takes images (GET /v1/models lists each model's input_modalities).");
        }
    }

    /** The part the chat template receives in the image's place (the Hugging Face processors' message format). */
    public static java.util.Map<String, Object> templatePart() {
        return java.util.Map.of("type", "image");
    }
}
