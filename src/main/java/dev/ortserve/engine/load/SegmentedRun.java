package dev.ortserve.engine.load;

import dev.ortserve.engine.rewrite.ModelSegments;
import dev.ortserve.engine.runner.OrtDecoderRunner;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Runs a model one {@link ModelSegments segment} at a time: a segment's session is opened, run on the
 * pass's inputs and what earlier segments handed on, its outputs copied out, and closed before the
 * next one opens. The load probe runs the original this way, so a cold start never has the whole
 * original resident: its peak is one segment's weights (the largest, at real size the embedding the
 * tied head reads) instead of the model's.
 */
public final class SegmentedRun implements OrtDecoderRunner.Executor {

    /** Opens and releases the segments' sessions (the loader's own, which it counts). */
    public interface Sessions {
        OrtSession open(Path modelFile);

        void release(OrtSession session);
    }

    private final OrtEnvironment env;
    private final ModelSegments segments;
    private final Sessions sessions;

    public SegmentedRun(OrtEnvironment env, ModelSegments segments, Sessions sessions) {
        this.env = env;
        this.segments = segments;
        this.sessions = sessions;
    }

    @Override
    public Set<String> inputNames() {
        Set<String> names = new LinkedHashSet<>();
        for (ModelSegments.Port p : segments.inputs()) names.add(p.name());
        return names;
    }

    @Override
    public OrtDecoderRunner.Outputs run(Map<String, OnnxTensor> in, Set<String> outputs, Map<String, OnnxTensor> pinned,
                                        ai.onnxruntime.OrtSession.RunOptions options) throws OrtException {
        if (!pinned.isEmpty()) throw new IllegalArgumentException("a segmented run writes no outputs in place");
        if (options != null) throw new IllegalArgumentException("a segmented run (the load check) runs no adapter");
        Map<String, OnnxTensor> live = new HashMap<>(in);
        List<OnnxTensor> owned = new ArrayList<>();
        try {
            for (int i = 0; i < segments.segments().size(); i++) {
                ModelSegments.Segment s = segments.segments().get(i);
                Map<String, Integer> types = new HashMap<>();
                Map<String, OnnxTensor> feed = new HashMap<>();
                for (String name : s.inputs()) {
                    OnnxTensor t = live.get(name);
                    if (t == null) throw new IllegalStateException("segment " + i + " reads " + name + ", which nothing computed");
                    types.put(name, elemType(t.getInfo().type));
                    feed.put(name, t);
                }
                Path file;
                try {
                    file = segments.write(i, types);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                OrtSession session = sessions.open(file);
                try (OrtSession.Result r = session.run(feed, new LinkedHashSet<>(s.outputs()))) {
                    for (String name : s.outputs()) {
                        OnnxTensor copy = copy((OnnxTensor) r.get(name).orElseThrow());
                        owned.add(copy);
                        live.put(name, copy);
                    }
                } finally {
                    sessions.release(session);
                    try {
                        segments.release(i);
                    } catch (IOException ignored) {
                        // the work directory goes with the segments
                    }
                }
            }
        } catch (OrtException | RuntimeException e) {
            owned.forEach(OnnxTensor::close);
            throw e;
        }
        for (String name : outputs) {
            if (!live.containsKey(name)) {
                owned.forEach(OnnxTensor::close);
                throw new IllegalStateException("no segment computed the output " + name);
            }
        }
        return new OrtDecoderRunner.Outputs() {
            @Override
            public OnnxTensor get(String name) {
                OnnxTensor t = live.get(name);
                if (t == null || !outputs.contains(name)) throw new IllegalStateException("no output " + name);
                return t;
            }

            @Override
            public void close() {
                owned.forEach(OnnxTensor::close);
            }
        };
    }

    /** ONNX's element type (TensorProto.DataType) of a Java tensor type. */
    static int elemType(OnnxJavaType type) {
        for (int i = 0; i < TYPES.length; i++) if (TYPES[i] == type) return i;
        throw new IllegalArgumentException("no ONNX element type for " + type);
    }

    /** The Java tensor type of an ONNX element type (TensorProto.DataType), UNKNOWN for those Java has none of. */
    public static OnnxJavaType javaType(int elemType) {
        return elemType >= 0 && elemType < TYPES.length && TYPES[elemType] != null ? TYPES[elemType] : OnnxJavaType.UNKNOWN;
    }

    /** Indexed by TensorProto.DataType: 1 FLOAT, 2 UINT8, 3 INT8, 5 INT16, 6 INT32, 7 INT64, 8 STRING, 9 BOOL, 10 FLOAT16, 11 DOUBLE, 16 BFLOAT16. */
    private static final OnnxJavaType[] TYPES = {null, OnnxJavaType.FLOAT, OnnxJavaType.UINT8, OnnxJavaType.INT8, null, OnnxJavaType.INT16,
            OnnxJavaType.INT32, OnnxJavaType.INT64, OnnxJavaType.STRING, OnnxJavaType.BOOL, OnnxJavaType.FLOAT16, OnnxJavaType.DOUBLE, null, null,
            null, null, OnnxJavaType.BFLOAT16};

    /** A tensor that outlives its session's result (a direct copy of its bytes). */
    private OnnxTensor copy(OnnxTensor t) throws OrtException {
        ByteBuffer bytes = t.getByteBuffer();
        ByteBuffer direct = ByteBuffer.allocateDirect(bytes.remaining()).order(ByteOrder.nativeOrder());
        direct.put(bytes).flip();
        return OnnxTensor.createTensor(env, direct, t.getInfo().getShape(), t.getInfo().type);
    }
}
