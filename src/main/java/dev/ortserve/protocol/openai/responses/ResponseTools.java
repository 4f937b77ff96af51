package dev.ortserve.protocol.openai.responses;

import dev.ortserve.wire.model.ResponsesCustomTool;
import dev.ortserve.wire.model.ResponsesCustomToolFormat;
import dev.ortserve.wire.model.ResponsesFunctionTool;
import dev.ortserve.wire.model.ResponsesHostedTool;
import dev.ortserve.wire.model.ResponsesNamespaceTool;
import dev.ortserve.wire.union.ResponsesTool;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.service.structured.JsonSchemaGrammar;
import dev.ortserve.service.structured.StructuredOutputs;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A request's tools as the chat template sees them: function tools as they are, the functions of
 * a namespace tool flattened under the name {@code <namespace>.<name>} (a dot no function name may
 * contain, so a call maps back to its namespace without ambiguity), custom tools as a function
 * with one string parameter {@code input}. A call the model makes is mapped back by its template name.
 */
final class ResponseTools {

    /** What a template function stands for. */
    enum Kind { FUNCTION, CUSTOM }

    /**
     * One function as the template sees it.
     *
     * @param templateName the name the template and the model use
     * @param name         the function's (or custom tool's) own name
     * @param namespace    its namespace tool, or null
     * @param syntax       a custom tool's grammar syntax ({@code lark}, {@code regex}), or null for free text
     * @param definition   that grammar
     * @param param        where the request gave the tool ({@code tools[i]})
     */
    record Tool(String templateName, String name, String namespace, Kind kind, String description, Map<String, Object> parameters,
                String syntax, String definition, String param) {

        boolean custom() {
            return kind == Kind.CUSTOM;
        }
    }

    static final String CUSTOM_INPUT = "input";

    private final Map<String, Tool> tools = new LinkedHashMap<>();

    private ResponseTools() {
    }

    static final ResponseTools NONE = new ResponseTools();

    /** The request's tools, checked: hosted tools and duplicate names are a 400 naming the tool. */
    static ResponseTools of(List<ResponsesTool> requested) {
        ResponseTools out = new ResponseTools();
        if (requested == null) return out;
        for (int i = 0; i < requested.size(); i++) {
            Object tool = requested.get(i).value();
            String param = "tools[" + i + "]";
            if (tool instanceof ResponsesHostedTool hosted) {
                throw new UnsupportedParameterException(param + ".type", "Hosted tools ('" + hosted.getType() + "') are not available on this "
                        + "server; only 'function', 'namespace' and 'custom' tools are supported. (Codex CLI: set web_search = \"disabled\" in "
                        + "config.toml.)");
            } else if (tool instanceof ResponsesFunctionTool f) {
                out.add(new Tool(f.getName(), f.getName(), null, Kind.FUNCTION, f.getDescription(), parameters(f.getParameters()), null, null,
                        param), param + ".name");
            } else if (tool instanceof ResponsesNamespaceTool ns) {
                for (int j = 0; j < ns.getTools().size(); j++) {
                    ResponsesFunctionTool f = ns.getTools().get(j);
                    String description = ns.getDescription() == null || ns.getDescription().isBlank() ? f.getDescription()
                            : f.getDescription() == null ? ns.getDescription() : ns.getDescription() + " " + f.getDescription();
                    out.add(new Tool(ns.getName() + "." + f.getName(), f.getName(), ns.getName(), Kind.FUNCTION, description,
                            parameters(f.getParameters()), null, null, param), param + ".tools[" + j + "].name");
                }
            } else if (tool instanceof ResponsesCustomTool c) {
                out.add(custom(c, param), param + ".name");
            }
        }
        return out;
    }

    private static Tool custom(ResponsesCustomTool c, String param) {
        ResponsesCustomToolFormat format = c.getFormat();
        String syntax = null;
        String definition = null;
        if (format != null && format.getType() == ResponsesCustomToolFormat.TypeEnum.GRAMMAR) {
            if (format.getSyntax() == null || format.getDefinition() == null) {
                throw new InvalidRequestException(param + ".format", "A grammar format needs 'syntax' ('lark' or 'regex') and 'definition'.");
            }
            syntax = format.getSyntax().toString();
            definition = format.getDefinition();
        } else if (format != null && (format.getSyntax() != null || format.getDefinition() != null)) {
            throw new InvalidRequestException(param + ".format", "'syntax' and 'definition' belong to a format of type 'grammar'.");
        }
        StringBuilder description = new StringBuilder(c.getDescription() == null ? "" : c.getDescription());
        if (syntax != null) {
            if (description.length() > 0) description.append("\n\n");
            description.append("The input follows this ").append(syntax.equals("lark") ? "Lark grammar" : "regular expression").append(":\n")
                    .append(definition);
        }
        Map<String, Object> input = new LinkedHashMap<>();
        input.put("type", "string");
        input.put("description", "The raw input of the tool, as free text.");
        if ("regex".equals(syntax)) input.put("pattern", "^(?:" + definition + ")$");
        Map<String, Object> parameters = new LinkedHashMap<>();
        parameters.put("type", "object");
        parameters.put("properties", Map.of(CUSTOM_INPUT, input));
        parameters.put("required", List.of(CUSTOM_INPUT));
        parameters.put("additionalProperties", false);
        return new Tool(c.getName(), c.getName(), null, Kind.CUSTOM, description.isEmpty() ? null : description.toString(), parameters,
                syntax, definition, param);
    }

    private static Map<String, Object> parameters(Map<String, Object> given) {
        return given == null ? Map.of("type", "object", "properties", Map.of()) : given;
    }

    private void add(Tool tool, String param) {
        if (tools.putIfAbsent(tool.templateName(), tool) != null) {
            throw new InvalidRequestException(param, "Two tools are named '" + tool.templateName() + "': tool names must be unique.");
        }
    }

    boolean isEmpty() {
        return tools.isEmpty();
    }

    /** The tools as the chat template receives them (OpenAI chat form). */
    List<Map<String, Object>> templateTools() {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Tool t : tools.values()) {
            Map<String, Object> function = new LinkedHashMap<>();
            function.put("name", t.templateName());
            if (t.description() != null) function.put("description", t.description());
            function.put("parameters", t.parameters());
            Map<String, Object> tool = new LinkedHashMap<>();
            tool.put("type", "function");
            tool.put("function", function);
            out.add(tool);
        }
        return out;
    }

    /** Each template function's parameters schema by template name (what parsers and forced-call grammars read). */
    Map<String, Map<String, Object>> schemas() {
        Map<String, Map<String, Object>> out = new LinkedHashMap<>();
        tools.values().forEach(t -> out.put(t.templateName(), "lark".equals(t.syntax()) ? larkParameters(t.definition()) : t.parameters()));
        return out;
    }

    /** A Lark custom tool's parameters as forced-call grammars read them: the input string under the grammar (not shown to the template). */
    private static Map<String, Object> larkParameters(String definition) {
        Map<String, Object> input = new LinkedHashMap<>();
        input.put("type", "string");
        input.put(JsonSchemaGrammar.LARK, definition);
        Map<String, Object> parameters = new LinkedHashMap<>();
        parameters.put("type", "object");
        parameters.put("properties", Map.of(CUSTOM_INPUT, input));
        parameters.put("required", List.of(CUSTOM_INPUT));
        parameters.put("additionalProperties", false);
        return parameters;
    }

    /** The tool a call names (by template name), or null for a name the request did not offer. */
    Tool called(String templateName) {
        return tools.get(templateName);
    }

    /** The template name of a call given back as input: {@code namespace.name} for a namespaced function. */
    static String templateName(String name, String namespace) {
        return namespace == null || namespace.isEmpty() ? name : namespace + "." + name;
    }

    /**
     * Checks the Lark grammar of every custom tool a forced call may go to ({@code forced}: the
     * named template function, null for 'required'): it must be in the subset this server enforces
     * (400 on {@code tools[i].format.definition} otherwise, saying what is supported).
     */
    void checkForcedCall(String forced) {
        for (Tool t : tools.values()) {
            if (!"lark".equals(t.syntax())) continue;
            if (forced == null || forced.equals(t.templateName())) StructuredOutputs.checkLarkGrammar(t.definition(), t.param() + ".format.definition");
        }
    }
}
