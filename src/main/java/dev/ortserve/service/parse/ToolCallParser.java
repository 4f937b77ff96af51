package dev.ortserve.service.parse;

import java.util.List;
import java.util.Map;

/**
 * Extracts tool calls from a model's raw output (decoded with its markers kept). One small class
 * per model family, selected by name ({@link ToolCallParsers}). Output that is not a well-formed
 * call stays content: a parser never fails a request.
 */
public interface ToolCallParser {

    String name();

    /**
     * @param tools the request's tools by function name, each with its JSON-Schema parameters
     *              (formats that write untyped values use them to type arguments)
     */
    Result parse(String text, Map<String, Map<String, Object>> tools);

    /** A call with its arguments as a JSON string (as the API returns them). */
    record ToolCall(String name, String arguments) {
    }

    /** The text that is not a call (null when there is none) and the calls, in order. */
    record Result(String content, List<ToolCall> calls) {
        static Result text(String text) {
            return new Result(text.isEmpty() ? null : text, List.of());
        }
    }
}
