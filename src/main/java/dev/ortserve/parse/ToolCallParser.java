package dev.ortserve.parse;

import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Extracts tool calls from a model's raw output (decoded with its markers kept). One small class
 * per model family, selected by name ({@link Parsers}). Output that is not a well-formed call
 * stays content: a parser never fails a request.
 */
public interface ToolCallParser {

    String name();

    /**
     * The whole output, once generation has ended.
     *
     * @param tools the request's tools by function name, each with its JSON-Schema parameters
     *              (formats that write untyped values use them to type arguments)
     */
    Result parse(String text, Map<String, Map<String, Object>> tools);

    /**
     * What is already certain of an output that is still being generated: the content (a prefix of
     * the content {@link #parse} gives for any continuation that completes the calls) and the calls
     * begun so far, each with its name and the arguments written so far (a prefix of its final
     * arguments). A call is only listed once its name is known.
     */
    Progress progress(String text, Map<String, Map<String, Object>> tools);

    /** An id for a call this format produced, as the model's chat template expects ids back. */
    default String newCallId() {
        return "call_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24);
    }

    /** A call id as the model's chat template is given it in the conversation (formats with their own id rules rewrite it). */
    default String templateCallId(String id) {
        return id;
    }

    /** A call with its arguments as a JSON string (as the API returns them). */
    record ToolCall(String name, String arguments) {
    }

    /** The text that is not a call (null when there is none) and the calls, in order. */
    record Result(String content, List<ToolCall> calls) {
        static Result text(String text) {
            return new Result(text.isEmpty() ? null : text, List.of());
        }
    }

    /** See {@link #progress}: content so far ("" for none) and the calls begun, the last possibly unfinished. */
    record Progress(String content, List<ToolCall> calls) {
        static Progress content(String content) {
            return new Progress(content, List.of());
        }
    }
}
