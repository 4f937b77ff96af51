package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import dev.ortserve.api.json.StrictJsonCustomizer;
import dev.ortserve.wire.model.ChatCompletionContentPartImage;
import dev.ortserve.wire.model.ChatCompletionContentPartText;
import dev.ortserve.wire.model.ResponseFunctionCallOutputItem;
import dev.ortserve.wire.model.ResponseInputMessage;
import dev.ortserve.wire.model.TokenizeChatRequest;
import dev.ortserve.wire.model.TokenizeCompletionRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The hand-written union types: every accepted shape, and rejection of the others without coercion. */
class UnionTypesTest {

    private final ObjectMapper mapper = strictMapper();

    static ObjectMapper strictMapper() {
        ObjectMapper m = new ObjectMapper();
        new StrictJsonCustomizer().customize(m);
        return m;
    }

    @Test
    void stopAcceptsStringAndArraysUpToFour() throws Exception {
        assertEquals(List.of("x"), mapper.readValue("\"x\"", StopSequences.class).values());
        assertEquals(List.of("a", "b", "c", "d"), mapper.readValue("[\"a\",\"b\",\"c\",\"d\"]", StopSequences.class).values());
        assertEquals("\"x\"", mapper.writeValueAsString(mapper.readValue("\"x\"", StopSequences.class)));
        assertEquals("[\"a\",\"b\"]", mapper.writeValueAsString(mapper.readValue("[\"a\",\"b\"]", StopSequences.class)));
    }

    @ParameterizedTest
    @ValueSource(strings = {"[\"a\",\"b\",\"c\",\"d\",\"e\"]", "1", "[1]", "true", "{}", "\"\"", "[\"\"]", "[[\"a\"]]"})
    void stopRejectsOtherShapes(String json) {
        MismatchedInputException e = assertThrows(MismatchedInputException.class, () -> mapper.readValue(json, StopSequences.class));
        assertTrue(e.getOriginalMessage().length() > 10, e.getOriginalMessage());
    }

    @Test
    void promptShapes() throws Exception {
        assertEquals(PromptInput.Shape.STRING, mapper.readValue("\"hi\"", PromptInput.class).shape());
        assertEquals(List.of("a", "b"), mapper.readValue("[\"a\",\"b\"]", PromptInput.class).texts());
        PromptInput tokens = mapper.readValue("[1,2,3]", PromptInput.class);
        assertEquals(PromptInput.Shape.TOKENS, tokens.shape());
        assertArrayEquals(new int[] {1, 2, 3}, tokens.tokenIds().get(0));
        PromptInput arrays = mapper.readValue("[[1],[2,3]]", PromptInput.class);
        assertEquals(2, arrays.size());
        assertArrayEquals(new int[] {2, 3}, arrays.tokenIds().get(1));
        assertEquals("[[1],[2,3]]", mapper.writeValueAsString(arrays));
    }

    @ParameterizedTest
    @ValueSource(strings = {"[]", "[1.5]", "[-1]", "[1,\"a\"]", "[\"a\",1]", "[[1],2]", "[[]]", "true", "{}", "3", "[true]", "[9999999999]"})
    void promptRejectsOtherShapes(String json) {
        assertThrows(MismatchedInputException.class, () -> mapper.readValue(json, PromptInput.class));
    }

    @Test
    void messageContentStringOrTypedParts() throws Exception {
        assertEquals("hi", mapper.readValue("\"hi\"", MessageContent.class).text());
        MessageContent parts = mapper.readValue("[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x\"}}]", MessageContent.class);
        assertNull(parts.text());
        assertInstanceOf(ChatCompletionContentPartText.class, parts.parts().get(0));
        assertInstanceOf(ChatCompletionContentPartImage.class, parts.parts().get(1));
        assertEquals("[{\"type\":\"text\",\"text\":\"a\"}]",
                mapper.writeValueAsString(mapper.readValue("[{\"type\":\"text\",\"text\":\"a\"}]", MessageContent.class)));
    }

    @ParameterizedTest
    @ValueSource(strings = {"[]", "5", "[\"a\"]", "[{\"type\":\"video\"}]", "[{\"text\":\"no type\"}]", "{\"type\":\"text\"}"})
    void messageContentRejectsOtherShapes(String json) {
        assertThrows(com.fasterxml.jackson.databind.JsonMappingException.class, () -> mapper.readValue(json, MessageContent.class));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "\"none\"|NONE||", "\"auto\"|AUTO||", "\"required\"|REQUIRED||",
            "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}|FUNCTION|f|false",
            "{\"type\":\"function\",\"name\":\"g\"}|FUNCTION|g|true"})
    void toolChoiceForms(String json, ToolChoice.Mode mode, String name, Boolean responsesForm) throws Exception {
        ToolChoice choice = mapper.readValue(json, ToolChoice.class);
        assertEquals(mode, choice.mode());
        assertEquals(name, choice.functionName());
        assertEquals(json, mapper.writeValueAsString(choice));
        if (responsesForm != null) {
            assertEquals(responsesForm, choice.responsesForm());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"\"sometimes\"", "1", "{\"type\":\"function\"}", "{\"type\":\"other\",\"name\":\"f\"}",
            "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"x\":1}}", "{\"type\":\"function\",\"name\":\"f\",\"extra\":true}", "[]"})
    void toolChoiceRejectsOtherShapes(String json) {
        assertThrows(MismatchedInputException.class, () -> mapper.readValue(json, ToolChoice.class));
    }

    @Test
    void responsesInputItemsDefaultToMessage() throws Exception {
        ResponsesInput input = mapper.readValue("[{\"role\":\"user\",\"content\":\"hi\"},"
                + "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"42\"}]", ResponsesInput.class);
        assertInstanceOf(ResponseInputMessage.class, input.items().get(0).value());
        assertInstanceOf(ResponseFunctionCallOutputItem.class, input.items().get(1).value());
        assertEquals("hello", mapper.readValue("\"hello\"", ResponsesInput.class).text());
        assertThrows(MismatchedInputException.class, () -> mapper.readValue("[{\"type\":\"computer_call\"}]", ResponsesInput.class));
        assertThrows(MismatchedInputException.class, () -> mapper.readValue("[\"x\"]", ResponsesInput.class));
        assertThrows(MismatchedInputException.class, () -> mapper.readValue("7", ResponsesInput.class));
    }

    @Test
    void tokenizeRequestPicksItsForm() throws Exception {
        assertInstanceOf(TokenizeCompletionRequest.class, mapper.readValue("{\"prompt\":\"x\"}", TokenizeRequest.class).value());
        assertInstanceOf(TokenizeChatRequest.class,
                mapper.readValue("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", TokenizeRequest.class).value());
        assertThrows(MismatchedInputException.class, () -> mapper.readValue("{\"prompt\":\"x\",\"messages\":[]}", TokenizeRequest.class));
    }

    @Test
    void embeddingVectorBase64IsLittleEndianFloat32() throws Exception {
        float[] values = {1.0f, -2.5f, 0.1f};
        EmbeddingVector vector = new EmbeddingVector(values, true);
        String json = mapper.writeValueAsString(vector);
        // 1.0f little-endian is 00 00 80 3f
        assertEquals("AACAPwAAIMDNzMw9", json.substring(1, json.length() - 1));
        assertArrayEquals(values, mapper.readValue(json, EmbeddingVector.class).values());
        assertEquals("[1.0,-2.5,0.1]", mapper.writeValueAsString(new EmbeddingVector(values, false)));
    }

    @Test
    void stopReasonIsStringOrInteger() throws Exception {
        assertEquals("\"###\"", mapper.writeValueAsString(StopReason.of("###")));
        assertEquals("7", mapper.writeValueAsString(StopReason.of(7)));
        assertThrows(MismatchedInputException.class, () -> mapper.readValue("true", StopReason.class));
    }
}
