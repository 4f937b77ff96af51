package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.TinyModelResource;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.wire.union.ResponsesInput;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.service.responses.CompactionSeal;
import dev.ortserve.service.responses.TestSeals;
import dev.ortserve.contract.ContractValidationFilter;
import dev.ortserve.contract.SseFrames;
import dev.ortserve.engine.FinishReason;
import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.parse.Parsers;
import dev.ortserve.store.record.ResponseIds;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * include: ["reasoning.encrypted_content"]: a reasoning item comes out with its text sealed under
 * the key replicas share (the compaction key), and given back as input it restores the reasoning
 * the template sees; a changed item, another API key's, or a compaction item passed off as
 * reasoning, is refused. Model text is scripted (a random model produces no reasoning on request).
 */
class EncryptedReasoningTest {

    static final ObjectMapper JSON = new ObjectMapper().setSerializationInclusion(JsonInclude.Include.NON_NULL);
    static TextTokenizer tokenizer;

    @BeforeAll
    static void load() throws Exception {
        tokenizer = TextTokenizer.load(TinyModelResource.directory().resolve("tokenizer.json"));
    }

    @AfterAll
    static void close() {
        tokenizer.close();
    }

    static CompactionSeal seal() {
        return TestSeals.with((OrtserveConfig) Proxy.newProxyInstance(OrtserveConfig.class.getClassLoader(), new Class<?>[] {OrtserveConfig.class},
                (proxy, method, args) -> method.getName().equals("compactionKey") ? Optional.of("shared by every replica") : null));
    }

    static ResponseCompaction compaction(CompactionSeal seal) {
        ResponseCompaction compaction = new ResponseCompaction();
        compaction.seal = seal;
        compaction.mapper = JSON;
        return compaction;
    }

    @Test
    void reasoningIsSealedAndRestoredFromInput() throws Exception {
        CompactionSeal seal = seal();
        ResponseCompaction compaction = compaction(seal);
        ResponseDraft draft = new ResponseDraft(JSON, ResponseIds.newConversation(), 1_700_000_000L, "tiny", new CreateResponseRequest().model("tiny"),
                false, new ResponseDraft.Sampling(1.0, 1.0, 0, 0), false);
        draft.sealReasoning(compaction.reasoningSealer("owner-a"));
        OutputParsers parsers = new OutputParsers(Parsers.reasoning("qwen3"), null, Map.of());
        ResponseRun run = new ResponseRun(draft, ResponseEventStreamTest.scripted("<think>\nA secret plan.\n</think>\n\nHello.", 3, FinishReason.STOP),
                parsers, JSON, null, "", JSON.createArrayNode(), piece -> tokenizer.encode(piece).length, 10);
        String body = String.join("", run.events().map(dev.ortserve.api.http.SseWriter::frames).collect().asList().await().atMost(Duration.ofSeconds(10)));
        assertEquals(List.of(), ContractValidationFilter.get().validateStream("POST", "/v1/responses", body));
        List<SseFrames.Frame> frames = SseFrames.parse(body);
        JsonNode response = JSON.readTree(frames.get(frames.size() - 1).data()).get("response");
        JsonNode reasoning = response.get("output").get(0);
        assertEquals("reasoning", reasoning.get("type").asText());
        String sealed = reasoning.get("encrypted_content").asText();
        assertTrue(sealed.startsWith("v1.") && !sealed.contains("secret"), sealed);

        // given back as input (as Codex does with store: false): the template sees the reasoning again
        ResponseItems items = new ResponseItems(JSON);
        String input = "[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"" + sealed + "\"},"
                + "{\"role\":\"assistant\",\"content\":\"Hello.\"}]";
        List<ObjectNode> normalized = items.normalize(JSON.readValue(input, ResponsesInput.class), id -> null, compaction.opener("owner-a"));
        List<Map<String, Object>> messages = items.templateMessages(normalized);
        assertEquals("A secret plan.", String.valueOf(messages.get(0).get("reasoning_content")).strip());

        // another API key's, a changed one, a compaction item passed off as reasoning: 400 invalid_encrypted_content
        InvalidRequestException foreign = assertThrows(InvalidRequestException.class,
                () -> items.normalize(JSON.readValue(input, ResponsesInput.class), id -> null, compaction.opener("owner-b")));
        assertEquals("input[0].encrypted_content", foreign.param());
        assertEquals("invalid_encrypted_content", foreign.code());
        char last = sealed.charAt(sealed.length() - 2);
        String tampered = sealed.substring(0, sealed.length() - 2) + (last == 'A' ? 'B' : 'A') + sealed.charAt(sealed.length() - 1);
        assertNotEquals(sealed, tampered);
        assertThrows(InvalidRequestException.class, () -> items.normalize(JSON.readValue(input.replace(sealed, tampered), ResponsesInput.class),
                id -> null, compaction.opener("owner-a")));
        String compactionSealed = seal.seal("A secret plan.", "owner-a");
        assertThrows(InvalidRequestException.class, () -> items.normalize(JSON.readValue(input.replace(sealed, compactionSealed), ResponsesInput.class),
                id -> null, compaction.opener("owner-a")));
    }
}
