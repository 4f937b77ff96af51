package dev.ortserve.service.chat;

import dev.ortserve.service.ImageInput;

import java.util.List;
import java.util.Map;

/**
 * What a chat turn asks of the model besides its messages and sampling, in domain terms: chat
 * completions and Responses each map their request to it and get the same turn.
 *
 * @param templateTools  the tools as the chat template receives them; null when the request has none
 * @param toolSchemas    each function's parameters schema by name (empty without tools)
 * @param toolChoice     null: auto
 * @param forcedFunction the function a {@link ToolChoice#FUNCTION} choice names
 * @param format         the output format; null: free text
 * @param images         the images the messages hold, in the order the prompt shows them (empty: none)
 */
public record ChatTurnRequest(List<Map<String, Object>> templateTools, Map<String, Map<String, Object>> toolSchemas,
                              ToolChoice toolChoice, String forcedFunction, OutputFormat format, List<ImageInput> images) {

    public ChatTurnRequest {
        images = images == null ? List.of() : List.copyOf(images);
    }

    public enum ToolChoice { AUTO, NONE, REQUIRED, FUNCTION }

    /**
     * A structured output format.
     *
     * @param param       the request field that set it (named in the error when it conflicts with a forced call)
     * @param schema      the JSON schema of {@link Kind#JSON_SCHEMA}
     * @param schemaParam the request field of that schema (named in its errors)
     */
    public record OutputFormat(Kind kind, String param, Map<String, Object> schema, String schemaParam) {

        public enum Kind { JSON_OBJECT, JSON_SCHEMA }

        public static OutputFormat jsonObject(String param) {
            return new OutputFormat(Kind.JSON_OBJECT, param, null, null);
        }

        public static OutputFormat jsonSchema(String param, Map<String, Object> schema, String schemaParam) {
            return new OutputFormat(Kind.JSON_SCHEMA, param, schema, schemaParam);
        }
    }

    public boolean hasTools() {
        return templateTools != null && !templateTools.isEmpty();
    }

    public ToolChoice choice() {
        return toolChoice == null ? ToolChoice.AUTO : toolChoice;
    }

    /** required or a named function: the output must be a call. */
    public boolean forcedCall() {
        return choice() == ToolChoice.REQUIRED || choice() == ToolChoice.FUNCTION;
    }
}
