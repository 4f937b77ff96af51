package dev.ortserve.api;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.errors.NotFoundException;
import com.openai.models.responses.EasyInputMessage;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.ResponseFunctionToolCall;
import com.openai.models.responses.ResponseInputItem;
import com.openai.models.responses.ResponseItem;
import com.openai.models.responses.ResponseStatus;
import com.openai.models.responses.ResponseStreamEvent;
import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** openai-java's Responses API as a real client: create, stream, retrieve, chain, list input items, delete, function-call round trip. */
@QuarkusTest
class OpenAiResponsesSdkTest extends ApiTest {

    @TestHTTPResource
    URL base;

    OpenAIClient client() {
        // strict: every response must parse into the SDK's types, not only the fields read here
        return OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1").apiKey("unused").maxRetries(0).responseValidation(true).build();
    }

    static String text(Response r) {
        StringBuilder out = new StringBuilder();
        r.output().stream().filter(i -> i.isMessage()).forEach(i -> i.asMessage().content()
                .forEach(c -> out.append(c.asOutputText().text())));
        return out.toString();
    }

    @Test
    void createRetrieveChainListAndDelete() {
        OpenAIClient client = client();
        Response first = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("Hello").maxOutputTokens(4).build());
        assertTrue(first.id().startsWith("resp_"));
        assertTrue(first.status().isPresent());
        Response again = client.responses().retrieve(first.id());
        assertEquals(first.id(), again.id());
        assertEquals(text(first), text(again));

        Response second = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("And then?")
                .previousResponseId(first.id()).maxOutputTokens(4).build());
        assertEquals(first.id(), second.previousResponseId().orElseThrow());
        assertTrue(second.usage().orElseThrow().inputTokens() > first.usage().orElseThrow().inputTokens());

        List<ResponseItem> items = client.responses().inputItems().list(second.id()).data();
        assertEquals(1, items.size());
        assertTrue(items.get(0).isResponseInputMessageItem());

        client.responses().delete(second.id());
        assertThrows(NotFoundException.class, () -> client.responses().retrieve(second.id()));
        assertThrows(NotFoundException.class, () -> client.responses().delete(second.id()));
    }

    @Test
    void the2026FieldsAreTypedAndEchoed() {
        OpenAIClient client = client();
        Response r = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("Hi").maxOutputTokens(3)
                .serviceTier(ResponseCreateParams.ServiceTier.DEFAULT).safetyIdentifier("hashed-user").promptCacheKey("k-1").maxToolCalls(3L)
                .putAdditionalBodyProperty("presence_penalty", com.openai.core.JsonValue.from(1.5)).build());
        // responseValidation(true): every required field was present with its type
        assertEquals(Response.ServiceTier.DEFAULT, r.serviceTier().orElseThrow());
        assertEquals("hashed-user", r.safetyIdentifier().orElseThrow());
        assertEquals("k-1", r.promptCacheKey().orElseThrow());
        assertEquals(3L, r.maxToolCalls().orElseThrow());
        assertEquals(0L, r.topLogprobs().orElseThrow());
        assertTrue(r.completedAt().orElseThrow() >= r.createdAt());
        assertEquals(1.5, r._additionalProperties().get("presence_penalty").convert(Double.class));
        assertTrue(r.accessPrograms().isEmpty() && r.conversation().isEmpty());
        Response again = client.responses().retrieve(r.id());
        assertEquals(r.completedAt(), again.completedAt());
    }

    @Test
    void phaseRoundTrip() {
        OpenAIClient client = client();
        List<ResponseInputItem> input = List.of(
                ResponseInputItem.ofEasyInputMessage(EasyInputMessage.builder().role(EasyInputMessage.Role.USER).content("Plan?").build()),
                ResponseInputItem.ofEasyInputMessage(EasyInputMessage.builder().role(EasyInputMessage.Role.ASSISTANT)
                        .phase(EasyInputMessage.Phase.COMMENTARY).content("Let me look.").build()),
                ResponseInputItem.ofEasyInputMessage(EasyInputMessage.builder().role(EasyInputMessage.Role.ASSISTANT)
                        .phase(EasyInputMessage.Phase.FINAL_ANSWER).content("Done.").build()));
        Response r = client.responses().create(ResponseCreateParams.builder().model(MODEL).inputOfResponse(input).maxOutputTokens(2).build());
        List<ResponseItem> items = client.responses().inputItems().list(r.id(),
                com.openai.models.responses.inputitems.InputItemListParams.builder().order(com.openai.models.responses.inputitems.InputItemListParams.Order.ASC)
                        .build()).data();
        assertEquals(3, items.size());
        assertEquals("commentary", items.get(1).asResponseOutputMessage().phase().orElseThrow().asString());
        assertEquals("final_answer", items.get(2).asResponseOutputMessage().phase().orElseThrow().asString());
    }

    @jakarta.inject.Inject
    dev.ortserve.service.GenerationModelHost host;

    @jakarta.inject.Inject
    dev.ortserve.service.ServingMetrics metrics;

    static Response awaitFinal(OpenAIClient client, String id) {
        long deadline = System.nanoTime() + java.time.Duration.ofSeconds(30).toNanos();
        while (true) {
            Response r = client.responses().retrieve(id);
            ResponseStatus s = r.status().orElseThrow();
            if (!s.equals(ResponseStatus.QUEUED) && !s.equals(ResponseStatus.IN_PROGRESS)) return r;
            assertTrue(System.nanoTime() < deadline, "still " + s);
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    static List<ResponseStreamEvent> events(StreamResponse<ResponseStreamEvent> stream) {
        try (stream) {
            return stream.stream().toList();
        }
    }

    static long sequence(ResponseStreamEvent e) {
        // every event type carries its sequence_number; read it as the SDK serializes the event
        return com.openai.core.ObjectMappers.jsonMapper().valueToTree(e).get("sequence_number").asLong();
    }

    @Test
    void backgroundCreatePollCompletedAndResume() {
        OpenAIClient client = client();
        Response queued = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("In the background").background(true)
                .maxOutputTokens(40).temperature(0.0).build());
        assertEquals(ResponseStatus.QUEUED, queued.status().orElseThrow());
        assertEquals(true, queued.background().orElseThrow());
        Response done = awaitFinal(client, queued.id());
        assertTrue(List.of(ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE).contains(done.status().orElseThrow()));
        assertTrue(done.completedAt().isPresent());

        List<ResponseStreamEvent> all = events(client.responses().retrieveStreaming(queued.id()));
        assertTrue(all.get(0).isCreated());
        ResponseStreamEvent last = all.get(all.size() - 1);
        assertTrue(last.isCompleted() || last.isIncomplete());
        for (int i = 0; i < all.size(); i++) assertEquals(i, sequence(all.get(i)));
        long after = all.size() / 2;
        List<ResponseStreamEvent> resumed = events(client.responses().retrieveStreaming(queued.id(),
                com.openai.models.responses.ResponseRetrieveParams.builder().startingAfter(after).build()));
        assertEquals(all.subList((int) after + 1, all.size()).stream().map(OpenAiResponsesSdkTest::sequence).toList(),
                resumed.stream().map(OpenAiResponsesSdkTest::sequence).toList(), "no gap, no duplicate");
        assertEquals(all.subList((int) after + 1, all.size()), resumed);
    }

    @Test
    void backgroundCancelMidGeneration() throws Exception {
        OpenAIClient client = client();
        var engine = (dev.ortserve.engine.batching.ContinuousBatchingEngine) host.engine();
        Response cancelled;
        String id;
        try (EngineHold hold = new EngineHold(engine, metrics.engineListener(host.modelId()))) {
            id = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("A long tale").background(true)
                    .maxOutputTokens(1900).temperature(0.0).build()).id();
            assertTrue(hold.awaitHeld());
            cancelled = client.responses().cancel(id);
        }
        assertEquals(ResponseStatus.CANCELLED, cancelled.status().orElseThrow());
        assertTrue(cancelled.usage().orElseThrow().outputTokens() < 1900 / 100, "well under max_output_tokens: " + cancelled.usage());
        assertEquals(ResponseStatus.CANCELLED, client.responses().retrieve(id).status().orElseThrow());
    }

    @Test
    void compactionThenContinuationWithAShorterPrompt() {
        OpenAIClient client = client();
        String longTurn = "Here is the whole story of the lighthouse keeper, told slowly. ".repeat(20);
        Response first = client.responses().create(ResponseCreateParams.builder().model(MODEL).input(longTurn).maxOutputTokens(8).build());
        Response second = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("And the ship?")
                .previousResponseId(first.id()).maxOutputTokens(8).build());
        Response third = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("And then?")
                .previousResponseId(second.id()).maxOutputTokens(8).build());

        com.openai.models.responses.CompactedResponse compacted = client.responses().compact(
                com.openai.models.responses.ResponseCompactParams.builder().model(MODEL).previousResponseId(third.id()).build());
        assertEquals(1, compacted.output().size());
        var item = compacted.output().get(0).asCompaction();
        assertTrue(compacted.usage().inputTokens() > 0, "the served model summarized the first turn");

        // fed back without previous_response_id, the compacted window continues the conversation with a shorter prompt
        String next = "What happened next?";
        Response viaChain = client.responses().create(ResponseCreateParams.builder().model(MODEL).input(next)
                .previousResponseId(third.id()).maxOutputTokens(2).store(false).build());
        Response viaCompaction = client.responses().create(ResponseCreateParams.builder().model(MODEL).inputOfResponse(List.of(
                ResponseInputItem.ofCompaction(com.openai.models.responses.ResponseCompactionItemParam.builder().id(item.id())
                        .encryptedContent(item.encryptedContent()).build()),
                ResponseInputItem.ofEasyInputMessage(EasyInputMessage.builder().role(EasyInputMessage.Role.USER).content(next).build())))
                .maxOutputTokens(2).build());
        long chained = viaChain.usage().orElseThrow().inputTokens();
        long compactedTokens = viaCompaction.usage().orElseThrow().inputTokens();
        assertTrue(compactedTokens < chained, compactedTokens + " prompt tokens after compaction, " + chained + " before");

        // the kept turns are there verbatim, after the summary
        List<ResponseItem> items = client.responses().inputItems().list(viaCompaction.id(),
                com.openai.models.responses.inputitems.InputItemListParams.builder().order(com.openai.models.responses.inputitems.InputItemListParams.Order.ASC)
                        .build()).data();
        List<String> texts = new ArrayList<>();
        for (ResponseItem i : items) {
            if (i.isResponseInputMessageItem()) i.asResponseInputMessageItem().content().forEach(c -> texts.add(c.asInputText().text()));
        }
        assertTrue(texts.get(0).startsWith("Summary of the earlier conversation:"), texts.toString());
        assertEquals(List.of("And the ship?", "And then?", next), texts.subList(1, texts.size()));

        // a tampered item is refused before any model work
        String sealed = item.encryptedContent();
        char flipped = sealed.charAt(sealed.length() / 2) == 'A' ? 'B' : 'A';
        String tampered = sealed.substring(0, sealed.length() / 2) + flipped + sealed.substring(sealed.length() / 2 + 1);
        var refused = assertThrows(com.openai.errors.BadRequestException.class, () -> client.responses().create(ResponseCreateParams.builder()
                .model(MODEL).inputOfResponse(List.of(ResponseInputItem.ofCompaction(com.openai.models.responses.ResponseCompactionItemParam.builder()
                        .encryptedContent(tampered).build()))).build()));
        assertEquals("input[0].encrypted_content", refused.param().orElseThrow());
        assertEquals("invalid_encrypted_content", refused.code().orElseThrow());
    }

    @Test
    void streamEndsWithTheResponseThatRetrieveReturns() {
        OpenAIClient client = client();
        StringBuilder deltas = new StringBuilder();
        List<Long> sequence = new ArrayList<>();
        Response done = null;
        try (StreamResponse<ResponseStreamEvent> stream = client.responses().createStreaming(ResponseCreateParams.builder()
                .model(MODEL).input("Stream please").maxOutputTokens(6).build())) {
            for (ResponseStreamEvent e : (Iterable<ResponseStreamEvent>) stream.stream()::iterator) {
                if (e.isOutputTextDelta()) deltas.append(e.asOutputTextDelta().delta());
                if (e.isCompleted()) done = e.asCompleted().response();
                if (e.isIncomplete()) done = e.asIncomplete().response();
            }
        }
        assertTrue(done != null, "a terminal event arrived");
        assertEquals(deltas.toString(), text(done));
        Response stored = client.responses().retrieve(done.id());
        assertEquals(done.status(), stored.status());
        assertEquals(text(done), text(stored));
        assertTrue(List.of(ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE).contains(stored.status().orElseThrow()));
    }

    @Test
    void functionCallRoundTrip() {
        OpenAIClient client = client();
        List<ResponseInputItem> input = List.of(
                ResponseInputItem.ofEasyInputMessage(EasyInputMessage.builder().role(EasyInputMessage.Role.USER).content("Weather in Paris?").build()),
                ResponseInputItem.ofFunctionCall(ResponseFunctionToolCall.builder().callId("call_abc").name("get_weather")
                        .arguments("{\"city\":\"Paris\"}").build()),
                ResponseInputItem.ofFunctionCallOutput(ResponseInputItem.FunctionCallOutput.builder().callId("call_abc").output("18C and sunny").build()));
        Response r = client.responses().create(ResponseCreateParams.builder().model(MODEL).inputOfResponse(input).maxOutputTokens(3).build());
        List<ResponseItem> items = client.responses().inputItems().list(r.id()).data();
        assertEquals(3, items.size());
        // newest first by default
        assertTrue(items.get(0).isFunctionCallOutput());
        assertEquals("call_abc", items.get(0).asFunctionCallOutput().callId().orElseThrow());
        assertTrue(items.get(1).isFunctionCall());
        assertEquals("get_weather", items.get(1).asFunctionCall().name());
        Response next = client.responses().create(ResponseCreateParams.builder().model(MODEL).input("Thanks")
                .previousResponseId(r.id()).maxOutputTokens(2).build());
        assertTrue(next.usage().orElseThrow().inputTokens() > r.usage().orElseThrow().inputTokens());
    }
}
