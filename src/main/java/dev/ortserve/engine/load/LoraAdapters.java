package dev.ortserve.engine.load;

import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtLoraAdapter;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.LoraAdapter;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.lora.AdapterFile;
import dev.ortserve.engine.lora.PeftAdapter;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Loads LoRA adapters for a loaded model: a PEFT directory is converted once to onnxruntime's adapter file (cached
 * under the model cache, keyed by the adapter's files, the graph's LoRA inputs and this converter's version), an
 * {@code .onnx_adapter} file is loaded as it is; either is checked against the LoRA inputs the served graph has
 * (every parameter one of them, of its shape) before onnxruntime loads it. Any mismatch is a {@link ModelLoadException}
 * naming the adapter and what does not fit.
 */
public final class LoraAdapters {

    private static final Logger LOG = Logger.getLogger(LoraAdapters.class);
    private static final String A = ".lora_A.MatMul.weight", B = ".lora_B.MatMul.weight";
    /** Bump when a conversion's output changes. */
    static final String VERSION = "1";

    private LoraAdapters() {
    }

    /** The projections PEFT adapters in these directories (or files) target, for the graph rewrite's LoRA inputs. */
    public static Set<String> targetModules(List<Path> adapters) {
        Set<String> modules = new TreeSet<>();
        for (Path p : adapters) {
            try {
                if (PeftAdapter.isPeft(p)) modules.addAll(PeftAdapter.targetModules(p));
                else if (Files.isRegularFile(p)) {
                    for (AdapterFile.Parameter param : AdapterFile.read(p)) {
                        String n = param.name();
                        if (n.endsWith(A)) modules.add(n.substring(0, n.length() - A.length()).replaceAll(".*\\.", ""));
                    }
                }
            } catch (IOException e) {
                throw new ModelLoadException("LoRA adapter " + p + ": " + e.getMessage(), e);
            }
        }
        return modules;
    }

    /** The adapter {@code id} from {@code source} (a PEFT directory or an .onnx_adapter file) for {@code model}. */
    public static LoraAdapter load(LoadedModel model, String id, Path source, Path cacheDir) {
        long started = System.nanoTime();
        String where = "LoRA adapter '" + id + "' (" + source + ")";
        try {
            Map<String, PeftAdapter.Target> targets = targets(model.servedFile());
            if (targets.isEmpty()) {
                throw new ModelLoadException(where + ": the served graph of " + model.directory() + " has no LoRA inputs (the rewrite found no"
                        + " projection by name, or was not applied: see the load's log)");
            }
            Path file;
            boolean converted = false;
            if (PeftAdapter.isPeft(source)) {
                file = converted(source, targets, cacheDir);
                converted = true;
            } else if (Files.isRegularFile(source)) {
                file = source;
            } else {
                throw new ModelLoadException(where + ": neither a PEFT adapter directory (adapter_config.json, adapter_model.safetensors) nor an"
                        + " .onnx_adapter file");
            }
            List<AdapterFile.Parameter> params = AdapterFile.read(file);
            check(where, params, targets);
            int projections = 0, maxRank = 0;
            for (AdapterFile.Parameter p : params) {
                if (!p.name().endsWith(A)) continue;
                projections++;
                maxRank = (int) Math.max(maxRank, p.dims()[1]);
            }
            LoraAdapter adapter = new LoraAdapter(id, source.toString(), OrtLoraAdapter.create(file.toString()), Files.size(file), projections, maxRank);
            LOG.infof("LoRA adapter '%s' on %s: %d projections, rank up to %d, %,d bytes, from %s%s in %d ms", id, model.directory(), projections, maxRank,
                    adapter.bytes(), source, converted ? " (converted: " + file + ")" : "", (System.nanoTime() - started) / 1_000_000);
            return adapter;
        } catch (PeftAdapter.MismatchException e) {
            throw new ModelLoadException(where + " does not fit the model: " + e.getMessage(), e);
        } catch (IOException | OrtException e) {
            throw new ModelLoadException(where + ": " + e.getMessage(), e);
        }
    }

    /** Every parameter one of the graph's LoRA inputs, A [in, r] and B [r, out] with the projection's in and out and one r. */
    private static void check(String where, List<AdapterFile.Parameter> params, Map<String, PeftAdapter.Target> targets) {
        Map<String, long[]> ranks = new LinkedHashMap<>();
        for (AdapterFile.Parameter p : params) {
            boolean isA = p.name().endsWith(A);
            if (!isA && !p.name().endsWith(B)) throw new ModelLoadException(where + ": parameter " + p.name() + " is not a LoRA input of the graph");
            String prefix = p.name().substring(0, p.name().length() - A.length());
            PeftAdapter.Target t = targets.get(prefix);
            if (t == null) throw new ModelLoadException(where + ": parameter " + p.name() + " is not a LoRA input of the graph");
            if (p.dataType() != t.dataType()) {
                throw new ModelLoadException(where + ": parameter " + p.name() + " has data type " + p.dataType() + ", the graph's input " + t.dataType());
            }
            long[] d = p.dims();
            boolean fits = d.length == 2 && (isA ? d[0] == t.in() : d[1] == t.out()) && p.data().remaining() == p.elements() * (t.dataType() == AdapterFile.FLOAT ? 4 : 2);
            if (!fits) {
                throw new ModelLoadException(where + ": parameter " + p.name() + " is " + java.util.Arrays.toString(d) + "; the graph takes "
                        + (isA ? "[" + t.in() + ", r]" : "[r, " + t.out() + "]"));
            }
            long[] r = ranks.computeIfAbsent(prefix, k -> new long[] {-1, -1});
            r[isA ? 0 : 1] = isA ? d[1] : d[0];
        }
        for (var e : ranks.entrySet()) {
            if (e.getValue()[0] != e.getValue()[1]) {
                throw new ModelLoadException(where + ": " + e.getKey() + " has " + (e.getValue()[0] < 0 ? "no lora_A" : e.getValue()[1] < 0 ? "no lora_B"
                        : "lora_A of rank " + e.getValue()[0] + " and lora_B of rank " + e.getValue()[1]));
            }
        }
    }

    /** The PEFT adapter converted for these LoRA inputs: from the cache, or converted now and cached. */
    private static Path converted(Path dir, Map<String, PeftAdapter.Target> targets, Path cacheDir) throws IOException {
        MessageDigest d;
        try {
            d = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        d.update((VERSION + targets).getBytes());
        d.update(Files.readAllBytes(dir.resolve("adapter_config.json")));
        Path weights = dir.resolve("adapter_model.safetensors");
        if (Files.isRegularFile(weights)) d.update((Files.size(weights) + ":" + Files.getLastModifiedTime(weights).toMillis()).getBytes());
        Path file = cacheDir.resolve("lora").resolve(HexFormat.of().formatHex(d.digest()).substring(0, 24) + ".onnx_adapter");
        if (Files.isRegularFile(file)) return file;
        List<AdapterFile.Parameter> params = PeftAdapter.convert(dir, targets);
        Files.createDirectories(file.getParent());
        AdapterFile.write(file, 1, 0, params);
        return file;
    }

    /** The served graph's LoRA inputs, by projection: in and out features and element type. */
    static Map<String, PeftAdapter.Target> targets(Path servedFile) throws IOException {
        Map<String, ValueInfoProto> inputs = GraphScan.inputs(servedFile, n -> n.endsWith(A) || n.endsWith(B));
        Map<String, PeftAdapter.Target> out = new LinkedHashMap<>();
        for (ValueInfoProto a : inputs.values()) {
            if (!a.getName().endsWith(A)) continue;
            String prefix = a.getName().substring(0, a.getName().length() - A.length());
            ValueInfoProto b = inputs.get(prefix + B);
            if (b == null) continue;
            long in = dim(a, 0), outFeatures = dim(b, 1);
            int type = a.getType().getTensorType().getElemType();
            if (in > 0 && outFeatures > 0) out.put(prefix, new PeftAdapter.Target(in, outFeatures, type));
        }
        return out;
    }

    private static long dim(ValueInfoProto v, int i) {
        TensorShapeProto s = v.getType().getTensorType().getShape();
        return s.getDimCount() > i && s.getDim(i).hasDimValue() ? s.getDim(i).getDimValue() : -1;
    }
}
