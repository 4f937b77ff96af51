package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.StringStringEntryProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.UnsafeByteOperations;
import org.jboss.logging.Logger;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads an ONNX model with its external data (tensors stored beside the model file, as exports of
 * models over 2 GB and most onnx-community files do) without copying weights into the Java heap:
 * the model file is mapped and parsed with aliasing (inline tensors stay views of the mapping), an
 * external tensor is read when a rewrite needs its values (one at a time). Writes a rewritten model whose
 * unchanged external tensors keep pointing at the source's data files (hard-linked into the output
 * directory, so nothing is copied) and whose new tensors go, one at a time, to one new data file.
 */
final class OnnxModelFile {

    private static final Logger LOG = Logger.getLogger(OnnxModelFile.class);
    /** Initializers larger than this go to the external data file when writing. */
    private static final int EXTERNAL_THRESHOLD = 1024;
    /** Name of the data file holding the tensors a rewrite made (and inline tensors of the source). */
    static final String NEW_DATA = "model.onnx.data";
    /** Prefix of a source data file linked into the output directory. */
    static final String LINKED_PREFIX = "source.";

    private OnnxModelFile() {
    }

    /** Bytes of external tensors read into the heap (see {@link #write}: the garbage a rewrite makes). */
    private static final java.util.concurrent.atomic.AtomicLong READ = new java.util.concurrent.atomic.AtomicLong();
    /**
     * Garbage between two collections while a rewrite writes its tensors. Each weight is read, packed
     * or quantized into buffers that are garbage once written; left to itself the collector lets the
     * heap grow with them (at Qwen3-0.6B's size 1.5 GB committed at int4, more than the served model),
     * and the process's peak with it. Collecting after every 256 MiB keeps the heap near its live set
     * (tens of MB) for ~1 s of a 20 s cold start.
     */
    static final long GARBAGE_BETWEEN_COLLECTIONS = 256L << 20;
    private static final int READ_CHUNK = 1 << 20;

    /** Bytes of external tensors read whole so far (tests: a comparison that streams reads none). */
    static long bytesRead() {
        return READ.get();
    }

    /** Parses the model; inline tensors alias the mapped file rather than being copied. */
    static ModelProto read(Path file) throws IOException {
        long size = Files.size(file);
        if (size < Integer.MAX_VALUE) {
            MappedByteBuffer map;
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
                map = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
            }
            CodedInputStream coded = CodedInputStream.newInstance(map);
            coded.enableAliasing(true);
            coded.setSizeLimit(Integer.MAX_VALUE);
            return ModelProto.parseFrom(coded);
        }
        try (InputStream in = Files.newInputStream(file)) {
            CodedInputStream coded = CodedInputStream.newInstance(in);
            coded.setSizeLimit(Integer.MAX_VALUE);
            return ModelProto.parseFrom(coded);
        }
    }

    /** Where an external tensor's bytes are. */
    record External(String location, long offset, long length) {
    }

    static External external(TensorProto t) throws IOException {
        if (t.getDataLocation() != TensorProto.DataLocation.EXTERNAL) return null;
        String location = null;
        long offset = 0, length = -1;
        for (StringStringEntryProto e : t.getExternalDataList()) {
            switch (e.getKey()) {
                case "location" -> location = e.getValue();
                case "offset" -> offset = Long.parseLong(e.getValue());
                case "length" -> length = Long.parseLong(e.getValue());
                default -> { }
            }
        }
        if (location == null) throw new IOException("tensor " + t.getName() + " is external but names no location");
        return new External(location, offset, length);
    }

    static Path dataFile(TensorProto t, String location, Path modelDir) throws IOException {
        Path data = modelDir.resolve(location).normalize();
        if (!data.startsWith(modelDir.normalize())) throw new IOException("tensor " + t.getName() + " points outside the model directory");
        return data;
    }

    /** The raw little-endian bytes of a tensor, from the model itself (a view) or its external data file. */
    static ByteString raw(TensorProto t, Path modelDir) throws IOException {
        External x = external(t);
        if (x != null) {
            Path data = dataFile(t, x.location(), modelDir);
            // read, not mapped: a mapping stays resident (and counted in the process's RSS) until the
            // collector finds its buffer, which for a rewrite that reads every weight once is the whole file
            try (FileChannel ch = FileChannel.open(data, StandardOpenOption.READ)) {
                long length = x.length() < 0 ? ch.size() - x.offset() : x.length();
                if (x.offset() + length > ch.size()) throw new IOException("tensor " + t.getName() + " runs past the end of " + data);
                ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(length));
                READ.addAndGet(length);
                // in chunks: a read into a heap buffer goes through a temporary direct buffer of the read's size, which
                // the JDK then caches for the thread (a 622 MB embedding read whole would stay resident twice over)
                for (long at = x.offset(); b.position() < b.capacity(); ) {
                    b.limit(Math.min(b.capacity(), b.position() + READ_CHUNK));
                    int n = ch.read(b, at);
                    if (n < 0) throw new IOException("tensor " + t.getName() + ": unexpected end of " + data);
                    at += n;
                }
                b.limit(b.capacity());
                return UnsafeByteOperations.unsafeWrap(b.flip());
            }
        }
        if (!t.getRawData().isEmpty()) return t.getRawData();
        if (t.getDataType() == TensorProto.DataType.FLOAT_VALUE && t.getFloatDataCount() > 0) {
            ByteBuffer b = ByteBuffer.allocate(4 * t.getFloatDataCount()).order(ByteOrder.LITTLE_ENDIAN);
            for (float v : t.getFloatDataList()) b.putFloat(v);
            return ByteString.copyFrom(b.array());
        }
        return ByteString.EMPTY;
    }

    /** A float32 tensor's values as a view. */
    static FloatBuffer floatView(TensorProto t, Path modelDir) throws IOException {
        return raw(t, modelDir).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    }

    /** A float32 tensor's values (small tensors: a heap copy). */
    static float[] floats(TensorProto t, Path modelDir) throws IOException {
        FloatBuffer fb = floatView(t, modelDir);
        float[] out = new float[fb.remaining()];
        fb.get(out);
        return out;
    }

    /** Bytes of a tensor a rewrite made, computed when it is written (one at a time). */
    interface Computed {
        ByteBuffer bytes() throws IOException;
    }

    /** What {@link #write} put where: source data files linked (file name in the output -> how), bytes written new. */
    record Written(Map<String, String> linked, long newBytes, long referencedBytes) {
    }

    /**
     * Writes {@code model} as {@code dir/model.onnx}: external tensors of the source keep their
     * offsets in the source's data files, which are hard-linked into {@code dir} (a symbolic link
     * where a hard link is impossible; a copy only as the last resort); tensors in {@code computed}
     * and inline tensors over 1 KB are written one at a time, page-aligned, to {@code dir/model.onnx.data}.
     */
    static Written write(ModelProto model, Path sourceDir, Path dir, Map<String, Computed> computed) throws IOException {
        return write(model, sourceDir, dir, computed, true);
    }

    /** @param copyIfUnlinkable copy a source data file that can be neither hard- nor symbolically linked (else fail) */
    static Written write(ModelProto model, Path sourceDir, Path dir, Map<String, Computed> computed, boolean copyIfUnlinkable) throws IOException {
        Path dataFile = dir.resolve(NEW_DATA);
        ModelProto.Builder out = model.toBuilder();
        var graph = out.getGraphBuilder();
        Map<String, String> linkedNames = new LinkedHashMap<>(); // source location -> name in dir
        Map<String, String> how = new LinkedHashMap<>();
        long offset = 0, referenced = 0;
        long garbageFrom = READ.get(), made = 0;
        try (OutputStream data = new BufferedOutputStream(Files.newOutputStream(dataFile), 1 << 20)) {
            for (int i = 0; i < graph.getInitializerCount(); i++) {
                TensorProto t = graph.getInitializer(i);
                Computed c = computed.get(t.getName());
                External x = c == null ? external(t) : null;
                if (x != null) {
                    String name = linkedNames.get(x.location());
                    if (name == null) {
                        name = LINKED_PREFIX + x.location().replaceAll("[^A-Za-z0-9._-]", "_");
                        how.put(name, link(dataFile(t, x.location(), sourceDir), dir.resolve(name), copyIfUnlinkable));
                        linkedNames.put(x.location(), name);
                    }
                    graph.setInitializer(i, location(t.toBuilder(), name, x.offset(), x.length() < 0 ? null : x.length()));
                    referenced += Math.max(0, x.length());
                    continue;
                }
                ByteString bytes = null;
                if (c != null) {
                    bytes = UnsafeByteOperations.unsafeWrap(c.bytes());
                    made += bytes.size();
                }
                else if (t.getRawData().size() > EXTERNAL_THRESHOLD) bytes = t.getRawData();
                if (bytes == null) continue;
                int align = bytes.size() >= 65536 ? 4096 : 64; // aligned, so the data file can be mapped
                long padding = (align - offset % align) % align;
                data.write(new byte[(int) padding]);
                offset += padding;
                // in chunks, as reads: a write from a heap array goes through a temporary direct buffer of its size
                for (int at = 0; at < bytes.size(); at += READ_CHUNK) bytes.substring(at, Math.min(bytes.size(), at + READ_CHUNK)).writeTo(data);
                graph.setInitializer(i, location(t.toBuilder().clearRawData().clearFloatData(), NEW_DATA, offset, (long) bytes.size()));
                offset += bytes.size();
                if (READ.get() - garbageFrom + made > GARBAGE_BETWEEN_COLLECTIONS) {
                    bytes = null;
                    System.gc();
                    garbageFrom = READ.get();
                    made = 0;
                }
            }
        }
        try (OutputStream o = new BufferedOutputStream(Files.newOutputStream(dir.resolve("model.onnx")))) {
            out.build().writeTo(o);
        }
        return new Written(how, offset, referenced);
    }

    private static TensorProto location(TensorProto.Builder t, String file, long offset, Long length) {
        t.clearExternalData().setDataLocation(TensorProto.DataLocation.EXTERNAL)
                .addExternalData(entry("location", file)).addExternalData(entry("offset", Long.toString(offset)));
        if (length != null) t.addExternalData(entry("length", Long.toString(length)));
        return t.build();
    }

    /** Links {@code source} as {@code target}; returns how ("hard link", "symbolic link", "copy"). */
    private static String link(Path source, Path target, boolean copyIfUnlinkable) throws IOException {
        try {
            Files.createLink(target, source);
            return "hard link";
        } catch (IOException | UnsupportedOperationException e) {
            try {
                Files.createSymbolicLink(target, source.toAbsolutePath());
                return "symbolic link";
            } catch (IOException | UnsupportedOperationException e2) {
                if (!copyIfUnlinkable) throw new IOException("cannot link " + source + " into " + target.getParent() + " (" + e2.getMessage() + ")", e2);
                LOG.warnf("Cannot link %s into the rewrite cache (%s); copying it", source, e.getMessage());
                Files.copy(source, target);
                return "copy";
            }
        }
    }

    private static StringStringEntryProto entry(String key, String value) {
        return StringStringEntryProto.newBuilder().setKey(key).setValue(value).build();
    }
}
