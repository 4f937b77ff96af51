package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import dev.ortserve.engine.TextTokenizer;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.response.ValidatableResponse;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Images end to end on every protocol, served by a SmolVLM (Idefics3) export in the onnx-community layout with random
 * weights (fixtures/smolvlm-tiny): chat completions (streamed and not), Responses and Messages answer an image with the
 * greedy tokens transformers' {@code generate} gives for the same image and prompt (references.json), and bad images
 * get a 400 naming the field, with nothing else affected.
 */
@QuarkusTest
@TestProfile(VisionChatTest.Profile.class)
class VisionChatTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            // fetching on, from the loopback address only (named: an address inside the network is never fetched otherwise)
            return Map.of("ortserve.model-path", "src/test/resources/fixtures/smolvlm-tiny", "ortserve.model-name", "smolvlm",
                    "ortserve.images.max-per-request", "2", "ortserve.images.fetch.enabled", "true", "ortserve.images.fetch.allowed-hosts", "127.0.0.1");
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }

    private static final Path DIR = Path.of("src/test/resources/fixtures/smolvlm-tiny");
    private static final Path IMAGES = Path.of("src/test/resources/fixtures/images");
    private static JsonNode reference;
    private static TextTokenizer tokenizer;

    @BeforeAll
    static void read() throws Exception {
        reference = new ObjectMapper().readTree(DIR.resolve("references.json").toFile());
        tokenizer = TextTokenizer.load(DIR.resolve("tokenizer.json"));
    }

    @AfterAll
    static void close() {
        tokenizer.close();
    }

    private static JsonNode refCase(String name) {
        for (JsonNode c : reference.path("cases")) if (c.path("name").asText().equals(name)) return c;
        throw new IllegalArgumentException(name);
    }

    /** What transformers generated for the case, as this server's text (special tokens kept). */
    private static String expected(JsonNode c) {
        int[] ids = new int[c.path("greedy_ids").size()];
        for (int i = 0; i < ids.length; i++) ids[i] = c.path("greedy_ids").get(i).asInt();
        return tokenizer.decode(ids, false);
    }

    private static String dataUrl(String file, String type) throws Exception {
        return "data:" + type + ";base64," + Base64.getEncoder().encodeToString(Files.readAllBytes(IMAGES.resolve(file)));
    }

    private static String imagePart(String url) {
        return "{\"type\":\"image_url\",\"image_url\":{\"url\":\"" + url + "\"}}";
    }

    private static String chat(String parts, String extra) {
        return "{\"model\":\"smolvlm\",\"max_tokens\":16,\"temperature\":0,\"skip_special_tokens\":false" + extra
                + ",\"messages\":[{\"role\":\"user\",\"content\":[" + parts + "]}]}";
    }

    private static com.sun.net.httpserver.HttpServer images;

    @BeforeAll
    static void serveImages() throws Exception {
        images = com.sun.net.httpserver.HttpServer.create(new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 0);
        byte[] png = Files.readAllBytes(IMAGES.resolve("b_grad_200x120.png"));
        images.createContext("/b.png", x -> {
            x.getResponseHeaders().add("Content-Type", "image/png");
            x.sendResponseHeaders(200, png.length);
            try (java.io.OutputStream out = x.getResponseBody()) {
                out.write(png);
            }
        });
        images.start();
    }

    @AfterAll
    static void stopImages() {
        images.stop(0);
    }

    @Test
    void anImageUrlIsFetchedFromAnAllowedHostAndAnsweredAsInline() {
        JsonNode png = refCase("png_one_image");
        json().body(chat(imagePart("http://127.0.0.1:" + images.getAddress().getPort() + "/b.png") + ",{\"type\":\"text\",\"text\":\"What is in this image?\"}", ""))
                .post("/v1/chat/completions").then().statusCode(200).body("choices[0].message.content", equalTo(expected(png)));
    }

    @Test
    void anImageInAnEarlierTurnIsShownAgainOnEveryProtocol() throws Exception {
        JsonNode twoTurns = refCase("two_turns");
        String url = dataUrl("b_grad_200x120.png", "image/png");
        String answer = "A gradient with red, green and blue stripes.";
        json().body("{\"model\":\"smolvlm\",\"max_tokens\":16,\"temperature\":0,\"skip_special_tokens\":false,\"messages\":["
                        + "{\"role\":\"user\",\"content\":[" + imagePart(url) + ",{\"type\":\"text\",\"text\":\"What is in this image?\"}]},"
                        + "{\"role\":\"assistant\",\"content\":\"" + answer + "\"},{\"role\":\"user\",\"content\":\"What colour is it mostly?\"}]}")
                .post("/v1/chat/completions").then().statusCode(200).body("choices[0].message.content", equalTo(expected(twoTurns)))
                .body("usage.prompt_tokens", equalTo(twoTurns.path("input_ids").size()));
        // text only on the vision model: its template reads parts only, so a string content reaches it as one text part (as vLLM does)
        JsonNode textOnly = refCase("text_only");
        json().body("{\"model\":\"smolvlm\",\"max_tokens\":16,\"temperature\":0,\"skip_special_tokens\":false,\"messages\":["
                        + "{\"role\":\"user\",\"content\":\"Write a short poem about the sea.\"}]}")
                .post("/v1/chat/completions").then().statusCode(200).body("choices[0].message.content", equalTo(expected(textOnly)))
                .body("usage.prompt_tokens", equalTo(textOnly.path("input_ids").size()));
        // Responses items: the same conversation as input items
        ValidatableResponse items = json().body("{\"model\":\"smolvlm\",\"max_output_tokens\":16,\"temperature\":0,\"input\":["
                        + "{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"" + url + "\"},{\"type\":\"input_text\",\"text\":\"What is in this image?\"}]},"
                        + "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"" + answer + "\"}]},"
                        + "{\"role\":\"user\",\"content\":\"What colour is it mostly?\"}]}")
                .post("/v1/responses").then().statusCode(200);
        assertEquals(tokenizer.decode(ids(twoTurns), true), items.extract().path("output.find { it.type == 'message' }.content[0].text"));
        // previous_response_id: the stored first turn's image is read again for the second
        String first = json().body("{\"model\":\"smolvlm\",\"max_output_tokens\":4,\"temperature\":0,\"input\":[{\"role\":\"user\",\"content\":["
                        + "{\"type\":\"input_image\",\"image_url\":\"" + url + "\"},{\"type\":\"input_text\",\"text\":\"What is in this image?\"}]}]}")
                .post("/v1/responses").then().statusCode(200).extract().path("id");
        int second = json().body("{\"model\":\"smolvlm\",\"max_output_tokens\":4,\"temperature\":0,\"previous_response_id\":\"" + first
                        + "\",\"input\":\"What colour is it mostly?\"}")
                .post("/v1/responses").then().statusCode(200).extract().path("usage.input_tokens");
        assertTrue(second > refCase("png_one_image").path("input_ids").size(), "the second turn's prompt holds the first turn's image tokens: " + second);
    }

    /**
     * Responses' truncation 'auto' measures a prompt as the model reads it, each image as its hundreds of tokens: a turn whose
     * earlier image pushes the prompt past the context drops that turn (and its image) and completes; with truncation off it
     * is a 400. Measured on the placeholder instead, the prompt "fit", nothing was dropped, and the expanded prompt was refused.
     */
    @Test
    void truncationCountsAnEarlierImageAsItsTokens() throws Exception {
        String url = dataUrl("b_grad_200x120.png", "image/png");
        int context = json().get("/v1/models/smolvlm").then().statusCode(200).extract().path("max_model_len");
        String first = json().body("{\"model\":\"smolvlm\",\"max_output_tokens\":4,\"temperature\":0,\"input\":[{\"role\":\"user\",\"content\":["
                        + "{\"type\":\"input_image\",\"image_url\":\"" + url + "\"},{\"type\":\"input_text\",\"text\":\"What is in this image?\"}]}]}")
                .post("/v1/responses").then().statusCode(200).extract().path("id");
        String second = "{\"model\":\"smolvlm\",\"max_output_tokens\":%d,\"temperature\":0,\"previous_response_id\":\"" + first
                + "\",\"input\":\"What colour is it mostly?\",\"instructions\":%s%s}";
        // the image is its tokens: those of the fixture's processor, 20 image tokens and 6 around them
        int imageTokens = 0;
        for (JsonNode id : refCase("png_one_image").path("input_ids")) if (id.asInt() == 476) imageTokens++;
        assertEquals(20, imageTokens);
        // instructions that fill most of the context, then max_output_tokens that leaves the prompt with the earlier image 10
        // tokens past it: without the image's expansion (its placeholder alone) it would fit
        int perHundred = tokenizer.encode(" sea".repeat(100), false).length;
        String instructions = new ObjectMapper().writeValueAsString("Be brief." + " sea".repeat((context - 400) * 100 / perHundred));
        int withImage = json().body(String.format(second, 1, instructions, "")).post("/v1/responses").then().statusCode(200)
                .extract().path("usage.input_tokens");
        assertTrue(withImage + 1 <= context && withImage > context - 600, "the instructions fill most of the context: " + withImage);
        int max = context - withImage + 10;
        json().body(String.format(second, max, instructions, "")).post("/v1/responses").then().statusCode(400)
                .body("error.code", equalTo("context_length_exceeded")).body("error.param", equalTo("max_output_tokens"));
        int truncated = json().body(String.format(second, max, instructions, ",\"truncation\":\"auto\"")).post("/v1/responses").then().statusCode(200)
                .body("status", equalTo("completed")).extract().path("usage.input_tokens");
        assertTrue(truncated + max <= context && truncated < withImage - imageTokens,
                "the earlier turn and its image were dropped: " + truncated + " input tokens (" + withImage + " with it), " + max + " to generate, a "
                        + context + " context");
    }

    @Test
    void openResponsesImageInput() throws Exception {
        // the Open Responses compliance suite's image-input test: a message item with an input_image (a data URL) and input_text, no
        // max_output_tokens, answered with a completed response holding a message (random weights: the JPEG case is the one whose
        // greedy answer ends at the end-of-utterance token)
        ValidatableResponse r = json().body("{\"model\":\"smolvlm\",\"temperature\":0,\"input\":[{\"type\":\"message\",\"role\":\"user\","
                        + "\"content\":[{\"type\":\"input_image\",\"image_url\":\"" + dataUrl("e_jpeg_64x48.jpg", "image/jpeg") + "\"},"
                        + "{\"type\":\"input_text\",\"text\":\"Describe this image.\"}]}]}")
                .post("/v1/responses").then().statusCode(200).body("status", equalTo("completed")).body("object", equalTo("response"));
        assertTrue(r.extract().jsonPath().getList("output.type").contains("message"));
    }

    @Test
    void theOpenAiAndAnthropicSdksSendImages() throws Exception {
        JsonNode png = refCase("png_one_image");
        com.openai.client.OpenAIClient openai = com.openai.client.okhttp.OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1")
                .apiKey("unused").maxRetries(0).responseValidation(true).build();
        com.openai.models.chat.completions.ChatCompletion completion = openai.chat().completions().create(
                com.openai.models.chat.completions.ChatCompletionCreateParams.builder().model("smolvlm").maxCompletionTokens(16).temperature(0.0)
                        .putAdditionalBodyProperty("skip_special_tokens", com.openai.core.JsonValue.from(false))
                        .addUserMessageOfArrayOfContentParts(List.of(
                                com.openai.models.chat.completions.ChatCompletionContentPart.ofImageUrl(
                                        com.openai.models.chat.completions.ChatCompletionContentPartImage.builder().imageUrl(
                                                com.openai.models.chat.completions.ChatCompletionContentPartImage.ImageUrl.builder()
                                                        .url(dataUrl("b_grad_200x120.png", "image/png")).build()).build()),
                                com.openai.models.chat.completions.ChatCompletionContentPart.ofText(
                                        com.openai.models.chat.completions.ChatCompletionContentPartText.builder().text("What is in this image?").build())))
                        .build());
        assertEquals(expected(png), completion.choices().get(0).message().content().orElseThrow());

        JsonNode jpeg = refCase("jpeg_one_image");
        String data = Base64.getEncoder().encodeToString(Files.readAllBytes(IMAGES.resolve("e_jpeg_64x48.jpg")));
        com.anthropic.client.AnthropicClient anthropic = com.anthropic.client.okhttp.AnthropicOkHttpClient.builder().baseUrl(contractChecked(base))
                .apiKey("unused").maxRetries(0).responseValidation(true).build();
        com.anthropic.models.messages.Message message = anthropic.messages().create(com.anthropic.models.messages.MessageCreateParams.builder()
                .model("smolvlm").maxTokens(16).putAdditionalBodyProperty("temperature", com.anthropic.core.JsonValue.from(0.0))
                .addUserMessageOfContentBlockParams(List.of(
                        com.anthropic.models.messages.ContentBlockParam.ofImage(com.anthropic.models.messages.ImageBlockParam.builder()
                                .source(com.anthropic.models.messages.Base64ImageSource.builder().data(data)
                                        .mediaType(com.anthropic.models.messages.Base64ImageSource.MediaType.IMAGE_JPEG).build()).build()),
                        com.anthropic.models.messages.ContentBlockParam.ofText(com.anthropic.models.messages.TextBlockParam.builder()
                                .text(userText(jpeg)).build())))
                .build());
        assertEquals(tokenizer.decode(ids(jpeg), true), message.content().get(0).asText().text());
    }

    @io.quarkus.test.common.http.TestHTTPResource
    java.net.URL base;

    @Test
    void theModelSaysItTakesImages() {
        given().get("/v1/models/smolvlm").then().statusCode(200).body("input_modalities", equalTo(List.of("text", "image")));
    }

    @Test
    void chatCompletionsAnswerAnImageAsTransformersDoes() throws Exception {
        JsonNode png = refCase("png_one_image");
        String body = chat(imagePart(dataUrl("b_grad_200x120.png", "image/png")) + ",{\"type\":\"text\",\"text\":\"What is in this image?\"}", "");
        json().body(body).post("/v1/chat/completions").then().statusCode(200)
                .body("choices[0].message.content", equalTo(expected(png)))
                .body("usage.prompt_tokens", equalTo(png.path("input_ids").size()));
        // /tokenize with the same messages: the image's tokens counted as the turn runs them
        json().body("{\"model\":\"smolvlm\",\"messages\":[{\"role\":\"user\",\"content\":[" + imagePart(dataUrl("b_grad_200x120.png", "image/png"))
                        + ",{\"type\":\"text\",\"text\":\"What is in this image?\"}]}]}").post("/tokenize").then().statusCode(200)
                .body("count", equalTo(png.path("input_ids").size()));
        // detail low: one frame at the base resolution (the processor without tiles), 4 image tokens instead of 20
        int low = json().body(chat("{\"type\":\"image_url\",\"image_url\":{\"url\":\"" + dataUrl("b_grad_200x120.png", "image/png")
                        + "\",\"detail\":\"low\"}},{\"type\":\"text\",\"text\":\"What is in this image?\"}", "")).post("/v1/chat/completions")
                .then().statusCode(200).extract().path("usage.prompt_tokens");
        int tiles = png.path("input_ids").size();
        assertTrue(low < tiles - 16, "detail low: " + low + " prompt tokens, tiled: " + tiles);
        // streamed: the same text, chunk by chunk
        String sse = json().body(body.replace("\"max_tokens\":16", "\"max_tokens\":16,\"stream\":true")).post("/v1/chat/completions")
                .then().statusCode(200).extract().asString();
        StringBuilder text = new StringBuilder();
        for (String line : sse.split("\n")) {
            if (!line.startsWith("data: {")) continue;
            JsonNode chunk = new ObjectMapper().readTree(line.substring(6));
            JsonNode content = chunk.path("choices").path(0).path("delta").path("content");
            if (content.isTextual()) text.append(content.asText());
        }
        assertEquals(expected(png), text.toString());
        // two images in one message, the first a JPEG-free random PNG: the frames of both, in order
        JsonNode two = refCase("two_images");
        json().body(chat(imagePart(dataUrl("a_rand_37x23.png", "image/png")) + "," + imagePart(dataUrl("b_grad_200x120.png", "image/png"))
                        + ",{\"type\":\"text\",\"text\":" + new ObjectMapper().writeValueAsString(userText(two)) + "}", ""))
                .post("/v1/chat/completions").then().statusCode(200).body("choices[0].message.content", equalTo(expected(two)));
    }

    @Test
    void responsesAndMessagesAnswerTheSameImageTheSameWay() throws Exception {
        JsonNode jpeg = refCase("jpeg_one_image");
        String url = dataUrl("e_jpeg_64x48.jpg", "image/jpeg");
        String question = new ObjectMapper().writeValueAsString(userText(jpeg));
        ValidatableResponse responses = json().body("{\"model\":\"smolvlm\",\"max_output_tokens\":16,\"temperature\":0,\"input\":[{\"role\":\"user\","
                + "\"content\":[{\"type\":\"input_image\",\"image_url\":\"" + url + "\"},{\"type\":\"input_text\",\"text\":" + question + "}]}]}")
                .post("/v1/responses").then().statusCode(200).body("usage.input_tokens", equalTo(jpeg.path("input_ids").size()));
        String out = responses.extract().path("output.find { it.type == 'message' }.content[0].text");
        assertEquals(tokenizer.decode(ids(jpeg), true), out);
        String data = url.substring(url.indexOf(',') + 1);
        io.restassured.path.json.JsonPath message = json().body("{\"model\":\"smolvlm\",\"max_tokens\":16,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":["
                        + "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/jpeg\",\"data\":\"" + data + "\"}},"
                        + "{\"type\":\"text\",\"text\":" + question + "}]}]}")
                .post("/v1/messages").then().statusCode(200).body("content[0].text", equalTo(tokenizer.decode(ids(jpeg), true)))
                .body("stop_reason", equalTo("end_turn"))
                // the same image and prompt as the Responses turn just before: its prefix is read from the cache (Anthropic counts it apart)
                .body("usage.cache_read_input_tokens", org.hamcrest.Matchers.greaterThan(0)).extract().jsonPath();
        assertEquals(jpeg.path("input_ids").size(), message.getInt("usage.input_tokens") + message.getInt("usage.cache_read_input_tokens"));
        // count_tokens counts the image's tokens as /v1/messages runs them
        json().body("{\"model\":\"smolvlm\",\"messages\":[{\"role\":\"user\",\"content\":["
                        + "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/jpeg\",\"data\":\"" + data + "\"}},"
                        + "{\"type\":\"text\",\"text\":" + question + "}]}]}")
                .post("/v1/messages/count_tokens").then().statusCode(200).body("input_tokens", equalTo(jpeg.path("input_ids").size()));
    }

    @Test
    void badImagesAreRefusedNamingTheirFieldAndNothingElseIsAffected() throws Exception {
        String text = ",{\"type\":\"text\",\"text\":\"What is in this image?\"}";
        byte[] png = Files.readAllBytes(IMAGES.resolve("b_grad_200x120.png"));
        String truncated = "data:image/png;base64," + Base64.getEncoder().encodeToString(java.util.Arrays.copyOf(png, png.length / 3));
        refused(chat(imagePart(truncated) + text, ""), "messages[0].content[0].image_url.url", "corrupt or truncated");
        String bomb = "data:image/png;base64," + Base64.getEncoder().encodeToString(dev.ortserve.image.ImageDecoderTest.pngHeaderOnly(20_000, 20_000));
        refused(chat(imagePart(bomb) + text, ""), "messages[0].content[0].image_url.url", "20000 x 20000 pixels");
        refused(chat(imagePart("data:image/png;base64," + Base64.getEncoder().encodeToString("%PDF-1.4 a document".getBytes())) + text, ""),
                "messages[0].content[0].image_url.url", "not in a format this server reads");
        refused(chat(imagePart("http://localhost:1/a.png") + text, ""), "messages[0].content[0].image_url.url", "only from the hosts it allows");
        refused(chat(imagePart("http://127.0.0.1:" + images.getAddress().getPort() + "/missing.png") + text, ""), "messages[0].content[0].image_url.url",
                "HTTP 404");
        String one = imagePart(dataUrl("a_rand_37x23.png", "image/png"));
        refused(chat(one + "," + one + "," + one + text, ""), "messages[0].content[2].image_url.url", "at most 2");
        // the server still answers text and images after all that
        json().body("{\"model\":\"smolvlm\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}").post("/v1/chat/completions")
                .then().statusCode(200);
        json().body(chat(one + text, "")).post("/v1/chat/completions").then().statusCode(200);
    }

    private static void refused(String body, String param, String says) {
        json().body(body).post("/v1/chat/completions").then().statusCode(400).body("error.param", equalTo(param))
                .body("error.type", equalTo("invalid_request_error")).body("error.message", containsString(says));
    }

    private static String userText(JsonNode c) {
        for (JsonNode part : c.path("messages").get(0).path("content")) if (part.path("type").asText().equals("text")) return part.path("text").asText();
        throw new IllegalArgumentException("no text");
    }

    private static int[] ids(JsonNode c) {
        int n = c.path("greedy_ids").size();
        int eos = reference.path("eos_token_id").asInt();
        java.util.List<Integer> out = new java.util.ArrayList<>();
        for (int i = 0; i < n; i++) if (c.path("greedy_ids").get(i).asInt() != eos) out.add(c.path("greedy_ids").get(i).asInt());
        return out.stream().mapToInt(Integer::intValue).toArray();
    }
}
