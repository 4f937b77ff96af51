package dev.ortserve.service;

import ai.onnxruntime.OrtException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.PromptImages;
import dev.ortserve.engine.VisionEncoder;
import dev.ortserve.image.Idefics3Processor;
import dev.ortserve.image.ImageDecoder;
import dev.ortserve.image.ImageException;
import dev.ortserve.image.ImageFetcher;
import dev.ortserve.image.ImageSource;
import dev.ortserve.image.PixelValues;
import dev.ortserve.image.Placeholders;
import dev.ortserve.image.RgbImage;
import dev.ortserve.service.error.GenerationFailedException;
import dev.ortserve.service.error.InvalidRequestException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A vision-language model's image side: the images of a turn read (inline or fetched), decoded and
 * preprocessed as its processor does, the rendered prompt's placeholders expanded to its image
 * tokens, and the images encoded into the features those tokens take. Blocking: call it off the
 * event loop.
 */
public final class VisionInput {

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Idefics3Processor processor;
    private final VisionEncoder encoder;
    private final ImageDecoder decoder;
    private final ImageFetcher fetcher;
    private final long maxBytes;
    private final int maxImages;

    VisionInput(Idefics3Processor processor, VisionEncoder encoder, OrtserveConfig.Images config) {
        this.processor = processor;
        this.encoder = encoder;
        this.decoder = new ImageDecoder(config.maxPixels());
        this.maxBytes = config.maxBytes().asLongValue();
        this.fetcher = new ImageFetcher(new ImageFetcher.Policy(config.fetch().enabled(), config.fetch().allowedHosts().orElse(List.of()),
                maxBytes, config.fetch().timeout()));
        this.maxImages = config.maxPerRequest();
    }

    /** The image side of {@code model}; null for a text model. Its processor is chosen by config.json's model_type. */
    static VisionInput of(LoadedModel model, OrtserveConfig.Images config) {
        if (model.vision() == null) return null;
        Path dir = model.directory();
        JsonNode modelConfig = read(dir.resolve("config.json"));
        String type = modelConfig.path("model_type").asText("").toLowerCase(Locale.ROOT);
        if (!type.equals("idefics3") && !type.equals("smolvlm")) {
            throw new ModelLoadException(dir + " is a vision-language export of model_type '" + type + "', whose image processor this server "
                    + "does not have yet (it has Idefics3 / SmolVLM's)");
        }
        JsonNode processorConfig = Files.isRegularFile(dir.resolve("processor_config.json")) ? read(dir.resolve("processor_config.json"))
                : JSON.createObjectNode();
        JsonNode preprocessor = Files.isRegularFile(dir.resolve("preprocessor_config.json")) ? read(dir.resolve("preprocessor_config.json"))
                : processorConfig.path("image_processor");
        int seqLen = processorConfig.path("image_seq_len").asInt(0);
        if (seqLen <= 0) {
            // image_seq_len = (image_size / patch_size)^2 / scale_factor^2, as the processor computes its default
            JsonNode vision = modelConfig.path("vision_config");
            int side = vision.path("image_size").asInt(0) / Math.max(1, vision.path("patch_size").asInt(1));
            int scale = modelConfig.path("scale_factor").asInt(1);
            seqLen = side * side / (scale * scale);
        }
        if (seqLen <= 0) throw new ModelLoadException(dir + ": no image_seq_len in processor_config.json, nor vision_config to derive it from");
        try {
            return new VisionInput(Idefics3Processor.of(preprocessor, seqLen), model.vision(), config);
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException(dir + ": " + e.getMessage(), e);
        }
    }

    /** The most images a request may hold. */
    public int maxImages() {
        return maxImages;
    }

    /** Each image read, decoded and preprocessed; a 400 naming the image's field when one cannot be. */
    public List<PixelValues> prepare(List<ImageInput> images) {
        return new Prepared().of(images);
    }

    /**
     * Images of one request read, decoded and preprocessed once each, however many prompts show them (Responses'
     * truncation measures a prompt per dropped turn). Not thread-safe: one request's.
     */
    public final class Prepared {
        private final java.util.Map<ImageInput, PixelValues> done = new java.util.HashMap<>();

        /** The pixel values of {@code images}, in order; a 400 naming the field of one that cannot be read, or of one too many. */
        public List<PixelValues> of(List<ImageInput> images) {
            if (images.size() > maxImages) {
                throw new InvalidRequestException(images.get(maxImages).param(), "The request holds " + images.size()
                        + " images; this server takes at most " + maxImages + " per request (the conversation's included).");
            }
            List<PixelValues> out = new ArrayList<>(images.size());
            for (ImageInput image : images) out.add(done.computeIfAbsent(image, VisionInput.this::read));
            return out;
        }
    }

    /** A request's images, each read and preprocessed once ({@link Prepared}). */
    public Prepared prepared() {
        return new Prepared();
    }

    private PixelValues read(ImageInput image) {
        try {
            byte[] bytes = image.source() instanceof ImageSource.Inline inline ? inline.bytes(maxBytes)
                    : fetcher.fetch(((ImageSource.Remote) image.source()).uri());
            RgbImage decoded = decoder.decode(bytes);
            return image.lowDetail() ? processor.process(decoded, false) : processor.process(decoded);
        } catch (ImageException e) {
            throw new InvalidRequestException(image.param(), e.getMessage());
        }
    }

    /**
     * The rendered prompt {@code text} with each image placeholder expanded to its image's tokens; a 400 on
     * {@code promptParam} when the template did not show each image once.
     */
    public String expand(String text, List<PixelValues> images, String promptParam) {
        int shown = Placeholders.count(text, Idefics3Processor.IMAGE_TOKEN);
        if (shown != images.size()) {
            throw new InvalidRequestException(promptParam, "The chat template shows " + shown + " image" + (shown == 1 ? "" : "s") + " for the "
                    + images.size() + " the messages hold (the text must not contain '" + Idefics3Processor.IMAGE_TOKEN + "' itself).");
        }
        return Placeholders.expand(text, Idefics3Processor.IMAGE_TOKEN, images);
    }

    /** The rendered prompt's text with {@code images} read, preprocessed and expanded in it, not encoded (counting its tokens). */
    public String expandedText(String rendered, List<ImageInput> images, String promptParam) {
        return expand(rendered, prepare(images), promptParam);
    }

    /** The features the prompt's image tokens ({@code ids}) take, in order; the images' content keys its cached prefix. */
    public PromptImages encode(int[] ids, List<PixelValues> images) {
        int tokens = 0;
        for (int id : ids) if (id == encoder.imageTokenId()) tokens++;
        int expected = images.stream().mapToInt(PixelValues::imageTokens).sum();
        if (tokens != expected) {
            throw new InvalidRequestException("messages", "The prompt holds " + tokens + " image tokens where its images need " + expected
                    + " (the text must not contain '" + Idefics3Processor.IMAGE_TOKEN + "' itself).");
        }
        int[] positions = new int[tokens];
        for (int i = 0, k = 0; i < ids.length; i++) if (ids[i] == encoder.imageTokenId()) positions[k++] = i;
        List<VisionEncoder.Features> features = new ArrayList<>(images.size());
        MessageDigest content = sha256();
        try {
            for (PixelValues pv : images) {
                features.add(encoder.encode(pv.values(), pv.frames(), pv.height(), pv.width()));
                digest(content, pv.values());
            }
        } catch (OrtException e) {
            throw new GenerationFailedException("The vision encoder failed on the request's images: " + e.getMessage());
        }
        int hidden = features.get(0).hidden();
        float[] all = new float[tokens * hidden];
        int at = 0;
        for (VisionEncoder.Features f : features) {
            if (f.hidden() != hidden || f.values().length + at > all.length) {
                throw new GenerationFailedException("The vision encoder gave " + f.tokens() + " x " + f.hidden() + " features where the prompt has "
                        + tokens + " image tokens");
            }
            System.arraycopy(f.values(), 0, all, at, f.values().length);
            at += f.values().length;
        }
        if (at != all.length) throw new GenerationFailedException("The vision encoder gave fewer features than the prompt has image tokens");
        return new PromptImages(positions, all, hidden, ByteBuffer.wrap(content.digest()).getLong());
    }

    /** The pixel values into {@code digest} through one small buffer (a 13-frame image is 40 MB of floats: never copied whole). */
    private static void digest(MessageDigest digest, float[] values) {
        ByteBuffer chunk = ByteBuffer.allocate(64 * 1024);
        java.nio.FloatBuffer floats = chunk.asFloatBuffer();
        for (int at = 0; at < values.length; at += floats.capacity()) {
            int n = Math.min(floats.capacity(), values.length - at);
            floats.clear();
            floats.put(values, at, n);
            digest.update(chunk.array(), 0, n * Float.BYTES);
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static JsonNode read(Path file) {
        try {
            return JSON.readTree(file.toFile());
        } catch (IOException e) {
            throw new ModelLoadException("Cannot read " + file + ": " + e.getMessage(), e);
        }
    }
}
