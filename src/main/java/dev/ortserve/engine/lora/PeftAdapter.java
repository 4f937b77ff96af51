package dev.ortserve.engine.lora;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A PEFT LoRA adapter ({@code adapter_config.json} + {@code adapter_model.safetensors}, as {@code save_pretrained}
 * writes it) converted to the graph's LoRA inputs: for each adapted projection, A [r, in] becomes the input
 * {@code <prefix>.lora_A.MatMul.weight} = A^T [in, r] and B [out, r] becomes {@code <prefix>.lora_B.MatMul.weight} =
 * s B^T [r, out], where s = lora_alpha / r (rsLoRA: lora_alpha / sqrt(r)), each module's own rank and alpha
 * (rank_pattern, alpha_pattern). Projections the graph packs (qkv_proj, gate_up_proj) get one A of the parts' ranks
 * side by side and one block-diagonal B. What does not fit the base (a module it has no LoRA inputs for, other
 * shapes, features the graph cannot apply: DoRA, biases, modules_to_save, fan_in_fan_out) is refused naming it.
 */
public final class PeftAdapter {

    private static final ObjectMapper JSON = new ObjectMapper();
    /** base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight (optionally with the adapter's name before weight). */
    private static final Pattern KEY = Pattern.compile("layers\\.(\\d+)\\.(?:self_attn|attn|mlp)\\.(\\w+)\\.lora_([AB])(?:\\.\\w+)?\\.weight$");
    private static final List<String> ATTENTION = List.of("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj");
    private static final Map<String, List<String>> PACKED = Map.of("qkv_proj", List.of("q_proj", "k_proj", "v_proj"),
            "gate_up_proj", List.of("gate_proj", "up_proj"));

    /** A projection's LoRA inputs in the graph: its in and out features and element type (AdapterFile's numbering). */
    public record Target(long in, long out, int dataType) {
    }

    /** An adapter refused: the message names the adapter and what does not fit. */
    public static final class MismatchException extends IOException {
        public MismatchException(String message) {
            super(message);
        }
    }

    private PeftAdapter() {
    }

    /** Whether {@code dir} holds a PEFT adapter. */
    public static boolean isPeft(Path dir) {
        return Files.isRegularFile(dir.resolve("adapter_config.json"));
    }

    /** The modules the adapter targets (from its config; PEFT's target_modules as names, or a regex's names). */
    public static List<String> targetModules(Path dir) throws IOException {
        JsonNode cfg = config(dir);
        JsonNode t = cfg.path("target_modules");
        List<String> out = new ArrayList<>();
        if (t.isArray()) t.forEach(m -> out.add(m.asText()));
        else if (t.isTextual()) { // a regex: the modules it names
            for (String m : List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj", "gate_up_proj")) {
                if (t.asText().contains(m)) out.add(m);
            }
        }
        return out;
    }

    private static JsonNode config(Path dir) throws IOException {
        Path file = dir.resolve("adapter_config.json");
        if (!Files.isRegularFile(file)) throw new MismatchException(dir + " has no adapter_config.json (a PEFT adapter directory is expected)");
        return JSON.readTree(file.toFile());
    }

    /** The graph's LoRA inputs for the adapter; {@code targets} maps each LoRA input prefix of the graph to its shape. */
    public static List<AdapterFile.Parameter> convert(Path dir, Map<String, Target> targets) throws IOException {
        JsonNode cfg = config(dir);
        String where = "it"; // the loader names the adapter and its path before this
        if (!"LORA".equalsIgnoreCase(cfg.path("peft_type").asText("LORA"))) {
            throw new MismatchException(where + " is a " + cfg.path("peft_type").asText() + " adapter; only LoRA adapters are served");
        }
        refuseIf(cfg.path("use_dora").asBoolean(false), where + " uses DoRA (use_dora), which this server does not apply");
        refuseIf(!cfg.path("bias").asText("none").equals("none") || cfg.path("lora_bias").asBoolean(false), where + " trains biases (bias/lora_bias)");
        refuseIf(cfg.path("fan_in_fan_out").asBoolean(false), where + " stores fan_in_fan_out weights (GPT-2 Conv1D layers)");
        refuseIf(cfg.hasNonNull("modules_to_save") && cfg.path("modules_to_save").size() > 0,
                where + " replaces whole modules (modules_to_save: " + cfg.path("modules_to_save") + "), which a LoRA input cannot");
        refuseIf(cfg.hasNonNull("layer_replication"), where + " replicates layers (layer_replication)");
        Path weights = dir.resolve("adapter_model.safetensors");
        if (!Files.isRegularFile(weights)) {
            throw new MismatchException(where + " has no adapter_model.safetensors" + (Files.isRegularFile(dir.resolve("adapter_model.bin"))
                    ? " (adapter_model.bin, PyTorch's pickle, is not read: save it with safe_serialization)" : ""));
        }
        double alpha = cfg.path("lora_alpha").asDouble(cfg.path("r").asDouble(8));
        boolean rslora = cfg.path("use_rslora").asBoolean(false);
        Map<String, Safetensors.Tensor> tensors = Safetensors.read(weights);
        // layer -> module -> [A, B]
        Map<Integer, Map<String, Safetensors.Tensor[]>> modules = new TreeMap<>();
        for (Map.Entry<String, Safetensors.Tensor> e : tensors.entrySet()) {
            Matcher m = KEY.matcher(e.getKey());
            if (!m.find()) throw new MismatchException(where + " has a tensor " + e.getKey() + " that is not a LoRA A or B of a layer's projection");
            Safetensors.Tensor[] ab = modules.computeIfAbsent(Integer.parseInt(m.group(1)), k -> new TreeMap<>())
                    .computeIfAbsent(m.group(2), k -> new Safetensors.Tensor[2]);
            ab[m.group(3).equals("A") ? 0 : 1] = e.getValue();
        }
        List<AdapterFile.Parameter> out = new ArrayList<>();
        for (var layer : modules.entrySet()) {
            Map<String, Part> parts = new TreeMap<>();
            for (var module : layer.getValue().entrySet()) {
                Safetensors.Tensor a = module.getValue()[0], b = module.getValue()[1];
                String name = "layer " + layer.getKey() + " " + module.getKey();
                if (a == null || b == null) throw new MismatchException(name + " has lora_" + (a == null ? "B" : "A") + " without its pair");
                if (a.shape().length != 2 || b.shape().length != 2 || a.shape()[0] != b.shape()[1]) {
                    throw new MismatchException(name + " has lora_A " + java.util.Arrays.toString(a.shape()) + " and lora_B "
                            + java.util.Arrays.toString(b.shape()) + " (expected [r, in] and [out, r])");
                }
                int r = (int) a.shape()[0];
                double s = pattern(cfg.path("alpha_pattern"), module.getKey(), layer.getKey(), alpha) / (rslora ? Math.sqrt(r) : r);
                parts.put(module.getKey(), new Part(name, r, (int) a.shape()[1], (int) b.shape()[0], a.floats(), b.floats(), s));
            }
            for (var p : parts.entrySet()) {
                String prefix = prefix(layer.getKey(), p.getKey());
                Target t = targets.get(prefix);
                if (t != null) {
                    out.addAll(parameters(where, prefix, t, List.of(p.getValue())));
                    continue;
                }
                String packed = PACKED.entrySet().stream().filter(e -> e.getValue().contains(p.getKey())).map(Map.Entry::getKey).findFirst().orElse(null);
                if (packed == null || !targets.containsKey(prefix(layer.getKey(), packed))) {
                    throw new MismatchException(where + " adapts " + p.getValue().name + ", a projection the base model has no LoRA inputs for"
                            + " (its LoRA inputs: " + describe(targets) + ")");
                }
            }
            for (var packed : PACKED.entrySet()) { // the parts of a projection the graph packs: one A, one block-diagonal B
                String prefix = prefix(layer.getKey(), packed.getKey());
                Target t = targets.get(prefix);
                if (t == null || parts.containsKey(packed.getKey())) continue;
                List<String> names = packed.getValue();
                if (names.stream().noneMatch(parts::containsKey)) continue;
                out.addAll(parameters(where, prefix, t, packedParts(where, layer.getKey(), packed.getKey(), names, parts, t)));
            }
        }
        if (out.isEmpty()) throw new MismatchException(where + " holds no LoRA weights");
        return out;
    }

    private record Part(String name, int rank, int in, int out, float[] a, float[] b, double scale) {
    }

    /** The parts of a packed projection in its column order; a part the adapter lacks gets rank 0 (its columns unchanged). */
    private static List<Part> packedParts(String where, int layer, String packed, List<String> names, Map<String, Part> parts, Target t)
            throws MismatchException {
        long known = 0;
        int missing = 0;
        for (String n : names) {
            if (parts.containsKey(n)) known += parts.get(n).out();
            else missing++;
        }
        long rest = t.out() - known;
        List<Part> out = new ArrayList<>();
        for (String n : names) {
            Part p = parts.get(n);
            if (p != null) {
                out.add(p);
                continue;
            }
            long width;
            if (packed.equals("qkv_proj")) { // k and v have the same width; q is what they leave
                long kv = parts.containsKey("k_proj") ? parts.get("k_proj").out() : parts.containsKey("v_proj") ? parts.get("v_proj").out() : -1;
                if (n.equals("q_proj")) width = kv < 0 ? -1 : t.out() - 2 * kv;
                else width = kv >= 0 ? kv : (t.out() - parts.get("q_proj").out()) / 2;
            } else { // gate and up have the same width
                width = rest / missing;
            }
            if (width <= 0) {
                throw new MismatchException("layer " + layer + "'s " + packed + " packs " + names + "; the adapter's parts do not say how"
                        + " its " + t.out() + " columns divide");
            }
            out.add(new Part("layer " + layer + " " + n, 0, (int) t.in(), (int) width, new float[0], new float[0], 0));
        }
        return out;
    }

    /** A and B of one projection (one part, or a packed projection's parts side by side), checked against its target. */
    private static List<AdapterFile.Parameter> parameters(String where, String prefix, Target t, List<Part> parts) throws MismatchException {
        int rank = 0, out = 0;
        for (Part p : parts) {
            if (p.in() != t.in()) {
                throw new MismatchException(p.name() + " takes " + p.in() + " features; the base model's projection takes " + t.in());
            }
            rank += p.rank();
            out += p.out();
        }
        if (out != t.out()) {
            throw new MismatchException((parts.size() == 1 ? parts.get(0).name() : prefix) + " gives " + out
                    + " features; the base model's projection gives " + t.out());
        }
        if (t.dataType() != AdapterFile.FLOAT) {
            throw new MismatchException("the base model computes " + prefix + " in float16; LoRA adapters are served on float32"
                    + " activations (fp32 models, and int8/int4 ones quantized from them)");
        }
        int in = (int) t.in();
        float[] a = new float[in * rank], b = new float[rank * out];
        int r0 = 0, c0 = 0;
        for (Part p : parts) {
            for (int k = 0; k < p.rank(); k++) {
                for (int i = 0; i < in; i++) a[i * rank + r0 + k] = p.a()[k * in + i]; // A^T: [in, r]
                for (int j = 0; j < p.out(); j++) b[(r0 + k) * out + c0 + j] = (float) (p.scale() * p.b()[j * p.rank() + k]); // s B^T: [r, out]
            }
            r0 += p.rank();
            c0 += p.out();
        }
        return List.of(new AdapterFile.Parameter(prefix + ".lora_A.MatMul.weight", new long[] {in, rank}, AdapterFile.FLOAT, floats(a)),
                new AdapterFile.Parameter(prefix + ".lora_B.MatMul.weight", new long[] {rank, out}, AdapterFile.FLOAT, floats(b)));
    }

    private static ByteBuffer floats(float[] v) {
        ByteBuffer b = ByteBuffer.allocate(v.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(v);
        return b;
    }

    /** The graph's LoRA input prefix of a projection (onnxruntime-genai's names). */
    public static String prefix(int layer, String module) {
        return "model.layers." + layer + "." + (ATTENTION.contains(module) ? "attn" : "mlp") + "." + module;
    }

    /** PEFT's rank_pattern / alpha_pattern: a key matches a module whose name ends with it (or a regex over its name). */
    private static double pattern(JsonNode patterns, String module, int layer, double otherwise) {
        String name = "model.layers." + layer + "." + (ATTENTION.contains(module) ? "self_attn" : "mlp") + "." + module;
        for (Iterator<Map.Entry<String, JsonNode>> it = patterns.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (name.endsWith(e.getKey()) || name.matches("(.*\\.)?(" + e.getKey() + ")$")) return e.getValue().asDouble();
        }
        return otherwise;
    }

    private static String describe(Map<String, Target> targets) {
        java.util.Set<String> modules = new java.util.TreeSet<>();
        for (String p : targets.keySet()) modules.add(p.substring(p.lastIndexOf('.') + 1));
        return targets.isEmpty() ? "none" : modules + " in " + targets.size() / Math.max(1, modules.size()) + " layers";
    }

    private static void refuseIf(boolean condition, String message) throws MismatchException {
        if (condition) throw new MismatchException(message + ", so it is not served");
    }
}
