package dev.ortserve.service;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.ortserve.engine.ModelLoadException;
import io.quarkus.runtime.configuration.MemorySize;
import io.quarkus.runtime.configuration.MemorySizeConverter;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Reads ORTSERVE_MODELS_FILE (YAML, of which JSON is a part): {@code models:} a list of entries with snake_case keys
 * (docs/models.md). Every mistake stops the start naming the file, the entry and the key: an unknown key, a missing id
 * or path, a name (id or alias) given twice, a value of the wrong kind.
 */
public final class ModelsFile {

    private static final Set<String> KEYS = Set.of("id", "aliases", "path", "revision", "file", "pinned", "keep_alive", "weight_precision",
            "max_model_len", "kv_cache_bytes", "chat_template", "tool_call_parser", "reasoning_parser", "draft_model_path", "kind", "adapters");
    /** What an embedding entry may say: the rest is about generation and the load/unload cycle (embedding models load at start and stay). */
    private static final Set<String> EMBEDDING_KEYS = Set.of("id", "aliases", "path", "revision", "file", "kind");

    private ModelsFile() {
    }

    public static List<ModelEntry> read(Path file) {
        JsonNode root;
        try {
            root = new ObjectMapper(new YAMLFactory()).readTree(file.toFile());
        } catch (IOException e) {
            throw new ModelLoadException("ORTSERVE_MODELS_FILE: cannot read " + file + ": " + e.getMessage(), e);
        }
        return parse(root, "ORTSERVE_MODELS_FILE " + file);
    }

    static List<ModelEntry> parse(JsonNode root, String where) {
        if (root == null || !root.isObject() || !root.path("models").isArray()) {
            throw new ModelLoadException(where + ": expected an object with a list 'models'");
        }
        for (Iterator<String> keys = root.fieldNames(); keys.hasNext(); ) {
            String key = keys.next();
            if (!key.equals("models")) throw new ModelLoadException(where + ": unknown key '" + key + "' (the file holds 'models')");
        }
        List<ModelEntry> entries = new ArrayList<>();
        Set<String> names = new HashSet<>();
        int index = 0;
        for (JsonNode node : root.path("models")) {
            String at = where + ": models[" + index++ + "]";
            if (!node.isObject()) throw new ModelLoadException(at + ": expected an object");
            for (Map.Entry<String, JsonNode> field : (Iterable<Map.Entry<String, JsonNode>>) node::fields) {
                if (!KEYS.contains(field.getKey())) {
                    throw new ModelLoadException(at + ": unknown key '" + field.getKey() + "' (known: " + String.join(", ", new java.util.TreeSet<>(KEYS)) + ")");
                }
            }
            String kindName = text(node, "kind", at);
            ModelEntry.Kind kind;
            if (kindName == null || kindName.equals("generation")) {
                kind = ModelEntry.Kind.GENERATION;
            } else if (kindName.equals("embedding")) {
                kind = ModelEntry.Kind.EMBEDDING;
                for (Iterator<String> keys = node.fieldNames(); keys.hasNext(); ) {
                    String key = keys.next();
                    if (!EMBEDDING_KEYS.contains(key)) {
                        throw new ModelLoadException(at + ": '" + key + "' is not for an embedding model (it takes "
                                + String.join(", ", new java.util.TreeSet<>(EMBEDDING_KEYS)) + "; embedding models load at start and stay)");
                    }
                }
            } else {
                throw new ModelLoadException(at + ": 'kind' must be generation or embedding, not '" + kindName + "'");
            }
            String id = text(node, "id", at);
            String path = text(node, "path", at);
            if (id == null || id.isBlank()) throw new ModelLoadException(at + ": 'id' is required");
            if (path == null || path.isBlank()) throw new ModelLoadException(at + " ('" + id + "'): 'path' is required");
            List<String> aliases = new ArrayList<>();
            JsonNode a = node.get("aliases");
            if (a != null && !a.isNull()) {
                if (!a.isArray()) throw new ModelLoadException(at + ": 'aliases' must be a list of names");
                for (JsonNode alias : a) {
                    if (!alias.isTextual() || alias.asText().isBlank()) throw new ModelLoadException(at + ": 'aliases' must be a list of names");
                    aliases.add(alias.asText());
                }
            }
            KeepAlive keepAlive = null;
            JsonNode k = node.get("keep_alive");
            if (k != null && !k.isNull()) {
                try {
                    keepAlive = KeepAlive.parse(k.asText());
                } catch (IllegalArgumentException e) {
                    throw new ModelLoadException(at + ": 'keep_alive' " + e.getMessage(), e);
                }
            }
            Integer maxModelLen = null;
            JsonNode len = node.get("max_model_len");
            if (len != null && !len.isNull()) {
                if (!len.canConvertToInt() || len.asInt() <= 0 || !len.isIntegralNumber()) {
                    throw new ModelLoadException(at + ": 'max_model_len' must be a positive whole number of tokens");
                }
                maxModelLen = len.asInt();
            }
            Long kvBytes = null;
            JsonNode kv = node.get("kv_cache_bytes");
            if (kv != null && !kv.isNull()) {
                try {
                    MemorySize size = new MemorySizeConverter().convert(kv.asText());
                    kvBytes = size.asLongValue();
                } catch (RuntimeException e) {
                    throw new ModelLoadException(at + ": 'kv_cache_bytes' must be a size such as 512M or 2G, not '" + kv.asText() + "'", e);
                }
            }
            JsonNode pinned = node.get("pinned");
            if (pinned != null && !pinned.isNull() && !pinned.isBoolean()) throw new ModelLoadException(at + ": 'pinned' must be true or false");
            String template = text(node, "chat_template", at);
            ModelEntry entry = new ModelEntry(id, aliases, path, text(node, "revision", at), text(node, "file", at),
                    pinned != null && pinned.asBoolean(), keepAlive, text(node, "weight_precision", at), maxModelLen, kvBytes,
                    template == null ? null : Path.of(template), text(node, "tool_call_parser", at), text(node, "reasoning_parser", at),
                    text(node, "draft_model_path", at), kind);
            if (kind == ModelEntry.Kind.EMBEDDING) entry = ModelEntry.embedding(id, aliases, path, entry.revision(), entry.file());
            else entry = entry.withAdapters(adapters(node.get("adapters"), at));
            for (String name : entry.names()) {
                if (!names.add(name)) throw new ModelLoadException(at + ": the name '" + name + "' is already given to another model");
            }
            for (ModelEntry.Adapter adapter : entry.adapters()) {
                if (!names.add(adapter.id())) throw new ModelLoadException(at + ": the adapter name '" + adapter.id() + "' is already given to another model or adapter");
            }
            entries.add(entry);
        }
        if (entries.isEmpty()) throw new ModelLoadException(where + ": 'models' lists no model");
        return entries;
    }

    /** {@code adapters:} a list of {id, path} (a PEFT adapter directory or an .onnx_adapter file; relative paths as the process sees them). */
    private static List<ModelEntry.Adapter> adapters(JsonNode list, String at) {
        if (list == null || list.isNull()) return List.of();
        if (!list.isArray()) throw new ModelLoadException(at + ": 'adapters' must be a list of {id, path}");
        List<ModelEntry.Adapter> out = new ArrayList<>();
        int i = 0;
        for (JsonNode a : list) {
            String where = at + ".adapters[" + i++ + "]";
            if (!a.isObject()) throw new ModelLoadException(where + ": expected an object with 'id' and 'path'");
            for (Iterator<String> keys = a.fieldNames(); keys.hasNext(); ) {
                String key = keys.next();
                if (!key.equals("id") && !key.equals("path")) throw new ModelLoadException(where + ": unknown key '" + key + "' (known: id, path)");
            }
            String id = text(a, "id", where), path = text(a, "path", where);
            if (id == null || id.isBlank()) throw new ModelLoadException(where + ": 'id' is required");
            if (path == null || path.isBlank()) throw new ModelLoadException(where + " ('" + id + "'): 'path' is required");
            out.add(new ModelEntry.Adapter(id, Path.of(path)));
        }
        return out;
    }

    /** ORTSERVE_LORA_MODULES' name=path pairs (vLLM's --lora-modules). */
    static List<ModelEntry.Adapter> loraModules(List<String> pairs) {
        List<ModelEntry.Adapter> out = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (String pair : pairs) {
            int eq = pair.indexOf('=');
            if (eq <= 0 || eq == pair.length() - 1) {
                throw new ModelLoadException("ORTSERVE_LORA_MODULES: '" + pair + "' is not name=path (a PEFT adapter directory or an .onnx_adapter file)");
            }
            String id = pair.substring(0, eq).trim();
            if (!seen.add(id)) throw new ModelLoadException("ORTSERVE_LORA_MODULES: the name '" + id + "' is given twice");
            out.add(new ModelEntry.Adapter(id, Path.of(pair.substring(eq + 1).trim())));
        }
        return out;
    }

    private static String text(JsonNode node, String key, String at) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return null;
        if (!v.isTextual()) throw new ModelLoadException(at + ": '" + key + "' must be a string");
        return v.asText();
    }
}
