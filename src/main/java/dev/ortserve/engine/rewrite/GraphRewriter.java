package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.ModelProto;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

/**
 * Rewrites a decoder graph on load (rotary and RMSNorm fusions, last-position logits, packed
 * projections, block-quantized weights, float16 KV) and keeps the
 * result in a cache directory keyed by the model file's hash, this rewriter's version and the
 * options, so a restart loads it directly. A cache entry is trusted only if its manifest matches
 * the key and the hashes of the files it lists; anything else is rebuilt. What was done, and how
 * long it took, is logged; the caller checks the result against the original before serving it
 * ({@link #markVerified}).
 */
public final class GraphRewriter {

    private static final Logger LOG = Logger.getLogger(GraphRewriter.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    public static final String LAST_POSITION_LOGITS = "last-position logits";
    public static final String PACKED_PROJECTIONS = "projections packed";
    /** What the attention fusion is listed as among the applied rewrites (followed by the layers it fused). */
    public static final String ATTENTION_FUSED = GroupQueryAttentionFusion.APPLIED;
    /** The decoder input the attention fusion derives each row's length from. */
    static final String ATTENTION_MASK = "attention_mask";
    /** What the float16 KV rewrite is listed as among the applied rewrites (followed by the nodes it moved). */
    public static final String HALF_KV = HalfKv.APPLIED;
    /** What moving each GroupQueryAttention's scale onto its query is listed as among the applied rewrites. */
    public static final String QUERY_SCALE = QueryScale.APPLIED;
    /** What holding the token embedding quantized (at int4 and int8 weights) is listed as among the applied rewrites (followed by its bits). */
    public static final String QUANTIZED_EMBEDDING = QuantizedEmbedding.APPLIED;
    /** What the LoRA rewrite is listed as among the applied rewrites (followed by the projections it gave inputs). */
    public static final String LORA_INPUTS = LoraInputs.APPLIED;
    public static final String NATIVE_ATTENTION = NativeAttention.APPLIED;
    public static final String NATIVE_MATMUL = NativeMatMul.APPLIED;
    /** The input a right-padded graph's last-position rewrite adds: each row's last column, int64 [batch, 1, 1]. */
    public static final String LAST_COLUMNS_INPUT = LastPositionLogits.LAST_COLUMNS_INPUT;
    /** Bump when a rewrite's output changes: older cache entries then no longer match. */
    static final String VERSION = "10"; // 3: unchanged external tensors stay in the (linked) source data file; 4: the RMSNorm fusion drops the constants it leaves unread; 5: a tied head reads the embedding (TiedHead); 6: ... as an overridable initializer, never prepacked; 7: float16 exports get the attention fusion (float16 / bfloat16 scales read), packed projections and the RMSNorm fusion; 8: a right-padded head gathers any number of columns per row (speculative verification); 9: GroupQueryAttention's scale on its query (QueryScale); 10: int4 / int8 hold the token embedding at 8 bits (QuantizedEmbedding)

    /**
     * A rewritten model: the file to load, what was applied, what was not and why, whether it came
     * from the cache and whether it was already checked against the original.
     */
    public record Result(Path file, List<String> applied, List<String> skipped, boolean cached, boolean verified, Path entry, String warning) {
    }

    private GraphRewriter() {
    }

    /** Null when nothing applies (the original is served). */
    public static Result rewrite(Path modelFile, String logitsName, RewriteOptions options, Path cacheRoot) throws IOException {
        return rewrite(modelFile, logitsName, "position_ids", 0, options, cacheRoot);
    }

    /**
     * Null when nothing applies (the original is served).
     *
     * @param positionIds the decoder's position input (the rotary fusion indexes its caches with it)
     * @param positions   the model's context length: rotary caches computed from the graph cover
     *                    positions 0 to this minus one (part of the cache key)
     */
    public static Result rewrite(Path modelFile, String logitsName, String positionIds, int positions, RewriteOptions options, Path cacheRoot)
            throws IOException {
        return rewrite(modelFile, logitsName, positionIds, positions, false, options, cacheRoot);
    }

    /**
     * @param rightPadded the engine right-pads the graph's rows (GroupQueryAttention graphs): the
     *                    last-position rewrite then takes each row's last column from the input
     *                    {@link #LAST_COLUMNS_INPUT}. Fixed by the model file, so not in the cache key.
     */
    public static Result rewrite(Path modelFile, String logitsName, String positionIds, int positions, boolean rightPadded,
                                 RewriteOptions options, Path cacheRoot) throws IOException {
        if (!options.any()) return null;
        long start = System.nanoTime();
        String key = key(modelFile, options, positions);
        Path entry = cacheRoot.resolve(key);
        Result cached = readEntry(entry, key);
        if (cached != null) {
            LOG.infof("Rewritten model from the cache %s (%s)", entry, String.join(", ", cached.applied()));
            return cached;
        }
        if (Files.exists(entry)) {
            LOG.warnf("Rewrite cache entry %s is stale or damaged; rebuilding it", entry);
            deleteTree(entry);
        }
        Graph g = new Graph(OnnxModelFile.read(modelFile), modelFile.getParent());
        int nodesBefore = g.graph.getNodeCount();
        List<String> applied = new ArrayList<>(), skipped = new ArrayList<>();
        // found first, by the names the exporter gave the projections; their side paths are added last
        List<LoraInputs.Projection> lora = options.loraModules().isEmpty() ? List.of() : LoraInputs.find(g, options.loraModules());
        if (options.fuseRotary()) { // first: it evaluates the position subgraph of the graph as exported
            RotaryFusion.Outcome o = RotaryFusion.apply(g, positionIds, positions);
            if (o.fused() > 0) applied.add("rotary fused (" + o.fused() + " RotaryEmbedding)");
            else skipped.add("rotary fusion: " + o.reason());
        }
        if (options.fuseAttention()) { // before the head rewrite: a fused graph is served right-padded
            GroupQueryAttentionFusion.Outcome o = GroupQueryAttentionFusion.apply(g, ATTENTION_MASK);
            if (o.fused() > 0) {
                applied.add(GroupQueryAttentionFusion.APPLIED + " (" + o.fused() + " layers)");
                rightPadded = true;
            } else {
                skipped.add(GroupQueryAttentionFusion.APPLIED + ": " + o.reason());
            }
            // fused or exported: onnxruntime's CPU kernel reads a decode step's keys without packing them only at scale 1
            QueryScale.Outcome q = QueryScale.apply(g);
            if (q.nodes() > 0) applied.add(QUERY_SCALE + " (" + q.nodes() + " GroupQueryAttention)");
            else skipped.add(QUERY_SCALE + ": " + q.reason());
        }
        if (options.lastPositionLogits()) {
            String why = LastPositionLogits.apply(g, logitsName, rightPadded);
            if (why == null) applied.add(LAST_POSITION_LOGITS); else skipped.add(LAST_POSITION_LOGITS + ": " + why);
        }
        if (options.packProjections()) { // before quantization, which then quantizes each packed matrix whole
            PackedProjections.Outcome o = PackedProjections.apply(g);
            if (o.packed() > 0) applied.add(PACKED_PROJECTIONS + " (" + o.replaced() + " MatMuls -> " + o.packed() + ")");
            else skipped.add(PACKED_PROJECTIONS + ": no constant-weight MatMuls share an input");
        }
        if (options.precision() != WeightPrecision.MODEL) {
            int n = BlockQuantizedWeights.apply(g, options.precision().bits);
            if (n > 0) applied.add(options.precision().name().toLowerCase() + " weights (" + n + " MatMuls)");
            else skipped.add(options.precision().name().toLowerCase() + " weights: no float32 or float16 constant-weight MatMul (already quantized, or bf16)");
            // after the MatMuls: a tied head quantized no longer reads the float embedding
            int e = QuantizedEmbedding.apply(g);
            if (e > 0) applied.add(QuantizedEmbedding.APPLIED + " (int" + QuantizedEmbedding.BITS + ")");
            else skipped.add(QuantizedEmbedding.APPLIED + ": no float token embedding read by " + QuantizedEmbedding.TOKEN_INPUT + "'s Gather alone");
        }
        // a float32 head that is the embedding transposed (stored twice, or a Transpose onnxruntime would fold into a copy) reads the embedding
        if (options.lastPositionLogits() && TiedHead.apply(g) > 0) applied.add(TiedHead.APPLIED);
        if (options.fuseNorms()) {
            int n = RmsNormFusion.apply(g);
            if (n > 0) applied.add("RMSNorm fused (" + n + " SimplifiedLayerNormalization)");
            else skipped.add("RMSNorm fusion: no RMSNorm subgraph of the known shapes");
        }
        if (options.halfKv()) { // last: it only wraps the GroupQueryAttention nodes the others left as they were
            HalfKv.Outcome o = HalfKv.apply(g);
            if (o.nodes() > 0) applied.add(HALF_KV + " (" + o.nodes() + " GroupQueryAttention in float16)");
            else skipped.add(HALF_KV + ": " + o.reason());
        }
        if (!options.loraModules().isEmpty()) { // after quantization: the LoRA MatMuls stay float
            int n = LoraInputs.apply(g, lora);
            if (n > 0) applied.add(LORA_INPUTS + " (" + n + " projections)");
            else skipped.add(LORA_INPUTS + ": no projection of " + options.loraModules() + " found by name");
        }
        if (options.nativeAttention()) { // last: float16 KV and the query scale find the op by its com.microsoft domain
            NativeAttention.Outcome o = NativeAttention.apply(g);
            if (o.nodes() > 0) applied.add(NATIVE_ATTENTION + " (" + o.nodes() + " GroupQueryAttention)");
            else skipped.add(NATIVE_ATTENTION + ": " + o.reason());
        }
        if (options.nativeMatMul()) { // node by node, after quantization (which writes the MatMulNBits it moves)
            int n = NativeMatMul.apply(g);
            if (n > 0) applied.add(NATIVE_MATMUL + " (" + n + " MatMulNBits)");
            else if (!g.nodesOf("com.microsoft", "MatMulNBits").isEmpty()) { // a float graph has none: nothing to say
                skipped.add(NATIVE_MATMUL + ": no MatMulNBits with float32 int8-quantized activations, 4 or 8 bits in blocks of 32 and no zero points");
            }
        }
        skipped.forEach(s -> LOG.infof("Rewrite not applied to %s: %s", modelFile, s));
        if (applied.isEmpty()) return null;
        Files.createDirectories(cacheRoot);
        Path tmp = Files.createTempDirectory(cacheRoot, key + ".tmp");
        try {
            OnnxModelFile.Written written = OnnxModelFile.write(g.model.build(), modelFile.getParent(), tmp, g.computed);
            ObjectNode manifest = JSON.createObjectNode().put("key", key).put("source", modelFile.toString()).put("verified", false);
            // the source's data files, linked: trusted by size and modification time (the key covers the source's)
            ObjectNode linked = manifest.putObject("linked");
            for (var l : written.linked().entrySet()) {
                Path p = tmp.resolve(l.getKey());
                linked.putObject(l.getKey()).put("how", l.getValue()).put("size", Files.size(p)).put("modified", Files.getLastModifiedTime(p).toMillis());
            }
            manifest.put("newBytes", written.newBytes()).put("referencedBytes", written.referencedBytes());
            manifest.set("applied", JSON.valueToTree(applied));
            manifest.set("skipped", JSON.valueToTree(skipped));
            manifest.put("model.onnx", sha256(tmp.resolve("model.onnx"))).put("model.onnx.data", checksum(tmp.resolve("model.onnx.data")));
            JSON.writerWithDefaultPrettyPrinter().writeValue(tmp.resolve("manifest.json").toFile(), manifest);
            if (!CacheEntries.publish(tmp, entry)) { // a replica sharing the cache wrote it while we did: theirs is served
                Result theirs = readEntry(entry, key);
                if (theirs == null) throw new IOException("another process wrote " + entry + " at the same time and it does not read back whole");
                LOG.infof("Rewritten model written by another process at the same time; serving its entry %s", entry);
                return theirs;
            }
        } catch (IOException | RuntimeException e) {
            deleteTree(tmp);
            throw e;
        }
        LOG.infof("Rewrote %s in %d ms: %s (%d nodes -> %d); cached in %s (%,d bytes of new tensors, the source's data files linked: %s)", modelFile,
                (System.nanoTime() - start) / 1_000_000, String.join(", ", applied), nodesBefore, g.graph.getNodeCount(), entry, newBytes(entry),
                linkedFiles(entry));
        return new Result(entry.resolve("model.onnx"), applied, skipped, false, false, entry, null);
    }

    private static long newBytes(Path entry) {
        try {
            return JSON.readTree(entry.resolve("manifest.json").toFile()).path("newBytes").asLong();
        } catch (IOException e) {
            return -1;
        }
    }

    private static String linkedFiles(Path entry) {
        try {
            List<String> out = new ArrayList<>();
            JSON.readTree(entry.resolve("manifest.json").toFile()).path("linked").fields()
                    .forEachRemaining(l -> out.add(l.getKey() + " (" + l.getValue().path("how").asText() + ")"));
            return out.isEmpty() ? "none" : String.join(", ", out);
        } catch (IOException e) {
            return "?";
        }
    }

    /**
     * Runs one model load's work (its load check and rewrite, on this thread): an exporter's stored head is
     * compared with the embedding once within it, not once by the check's segments and again by the rewrite.
     * Nothing is kept beyond it, so a file changed between loads is compared afresh.
     */
    public static <T> T oneLoad(java.util.function.Supplier<T> work) {
        boolean outer = TiedHead.ONE_LOAD.get() == null;
        if (outer) TiedHead.ONE_LOAD.set(new java.util.HashMap<>());
        try {
            return work.get();
        } finally {
            if (outer) TiedHead.ONE_LOAD.remove();
        }
    }

    /** A verified cache entry for these options, or null (then load the original and call {@link #rewrite}). */
    public static Result verifiedEntry(Path modelFile, RewriteOptions options, Path cacheRoot) throws IOException {
        return verifiedEntry(modelFile, options, 0, cacheRoot);
    }

    /** A verified cache entry for these options and context length, or null. */
    public static Result verifiedEntry(Path modelFile, RewriteOptions options, int positions, Path cacheRoot) throws IOException {
        if (!options.any()) return null;
        String key = key(modelFile, options, positions);
        Result r = readEntry(cacheRoot.resolve(key), key);
        return r != null && r.verified() ? r : null;
    }

    /** Records that the rewritten model gave the original's logits (within tolerance) on the probe. */
    public static void markVerified(Result result) throws IOException {
        markVerified(result, null);
    }

    /**
     * Records that the rewritten model was checked on the probe and is served; {@code warning} (the
     * measured agreement of a quantized model below its bound) is logged again on every start from the cache.
     */
    public static void markVerified(Result result, String warning) throws IOException {
        Path manifest = result.entry().resolve("manifest.json");
        ObjectNode m = (ObjectNode) JSON.readTree(manifest.toFile());
        m.put("verified", true);
        if (warning != null) m.put("warning", warning);
        // a name of its own: replicas sharing the cache may verify the same entry at once
        Path tmp = Files.createTempFile(result.entry(), "manifest.json", ".tmp");
        try {
            JSON.writerWithDefaultPrettyPrinter().writeValue(tmp.toFile(), m);
            Files.move(tmp, manifest, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /** Drops a rewrite that did not match the original. */
    public static void discard(Result result) throws IOException {
        deleteTree(result.entry());
    }

    /**
     * Records that these options' rewrite of the model missed the load check ({@code why}), so later
     * starts go straight to what is served instead (see {@link #refusal}): the miss is a property of
     * the file, this version and the options, all in the key.
     */
    public static void markRefused(Path modelFile, RewriteOptions options, int positions, Path cacheRoot, String why) throws IOException {
        Files.createDirectories(cacheRoot);
        Path marker = cacheRoot.resolve(key(modelFile, options, positions) + ".refused");
        Path tmp = Files.createTempFile(cacheRoot, "refused", ".tmp");
        Files.writeString(tmp, why);
        Files.move(tmp, marker, StandardCopyOption.REPLACE_EXISTING);
    }

    /** Why these options' rewrite of the model missed the load check before, or null if it has not. */
    public static String refusal(Path modelFile, RewriteOptions options, int positions, Path cacheRoot) throws IOException {
        if (!options.any()) return null;
        Path marker = cacheRoot.resolve(key(modelFile, options, positions) + ".refused");
        return Files.isRegularFile(marker) ? Files.readString(marker) : null;
    }

    private static Result readEntry(Path entry, String key) {
        try {
            Path manifestFile = entry.resolve("manifest.json");
            if (!Files.isRegularFile(manifestFile)) return null;
            JsonNode m = JSON.readTree(manifestFile.toFile());
            if (!key.equals(m.path("key").asText())) return null;
            for (String f : List.of("model.onnx", "model.onnx.data")) {
                Path p = entry.resolve(f);
                if (!Files.isRegularFile(p) || !(f.equals("model.onnx") ? sha256(p) : checksum(p)).equals(m.path(f).asText())) return null;
            }
            for (var it = m.path("linked").fields(); it.hasNext(); ) {
                var l = it.next();
                Path p = entry.resolve(l.getKey());
                if (!Files.isRegularFile(p) || Files.size(p) != l.getValue().path("size").asLong(-1)
                        || Files.getLastModifiedTime(p).toMillis() != l.getValue().path("modified").asLong(-1)) return null;
            }
            List<String> applied = new ArrayList<>(), skipped = new ArrayList<>();
            m.path("applied").forEach(a -> applied.add(a.asText()));
            m.path("skipped").forEach(a -> skipped.add(a.asText()));
            return new Result(entry.resolve("model.onnx"), applied, skipped, true, m.path("verified").asBoolean(false), entry,
                    m.hasNonNull("warning") ? m.get("warning").asText() : null);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The model file's hash, the sizes of its external data files beside it, this version, the options and (for rotary caches) the context. */
    static String key(Path modelFile, RewriteOptions options, int positions) throws IOException {
        MessageDigest d = digest();
        d.update(sha256(modelFile).getBytes());
        String prefix = modelFile.getFileName().toString();
        try (Stream<Path> siblings = Files.list(modelFile.getParent())) {
            for (Path p : siblings.filter(p -> !p.equals(modelFile) && p.getFileName().toString().startsWith(prefix)).sorted().toList()) {
                d.update((p.getFileName() + ":" + Files.size(p) + ":" + Files.getLastModifiedTime(p).toMillis()).getBytes());
            }
        }
        d.update((VERSION + ":" + options.key() + (options.fuseRotary() ? ":" + positions : "")).getBytes());
        return modelFile.getFileName().toString().replaceAll("[^A-Za-z0-9._-]", "_") + "-" + options.key() + "-"
                + HexFormat.of().formatHex(d.digest()).substring(0, 16);
    }

    /**
     * The data file's check on every start: its size and CRC-32C (the damage a cache suffers, a torn
     * or flipped write, is caught as surely, at memory speed: sha256 of a real-size model's 1.2 GB of
     * new tensors took 5 s of a 10 s warm start).
     */
    static String checksum(Path file) throws IOException {
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file)) {
            java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocateDirect(1 << 20);
            while (ch.read(buf) > 0) {
                buf.flip();
                crc.update(buf);
                buf.clear();
            }
            return "crc32c:" + Files.size(file) + ":" + Long.toHexString(crc.getValue());
        }
    }

    static String sha256(Path file) throws IOException {
        MessageDigest d = digest();
        byte[] buf = new byte[1 << 20];
        try (InputStream in = Files.newInputStream(file)) {
            for (int n; (n = in.read(buf)) > 0; ) d.update(buf, 0, n);
        }
        return HexFormat.of().formatHex(d.digest());
    }

    private static MessageDigest digest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        CacheEntries.deleteTree(dir);
    }
}
