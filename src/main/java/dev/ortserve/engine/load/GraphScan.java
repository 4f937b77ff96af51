package dev.ortserve.engine.load;

import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.ModelLoadException;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.WireFormat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;

/** What a model file's graph holds, read from its node list without loading it (weights embedded in the file are streamed past). */
final class GraphScan {

    private GraphScan() {
    }

    /** The op whose presence in a graph means {@link KvAlignment#START}. */
    static final String GROUP_QUERY_ATTENTION = "GroupQueryAttention";

    /**
     * The alignment a model file needs: {@link KvAlignment#START} when its graph runs GroupQueryAttention
     * (the model builder's attention), else {@link KvAlignment#END}. Reads the node list only, skipping the
     * initializers (weights embedded in the file are streamed past, not loaded); a file it cannot read is a
     * {@link ModelLoadException} naming it.
     */
    static KvAlignment alignment(Path modelFile) {
        try {
            return hasOp(modelFile, GROUP_QUERY_ATTENTION) ? KvAlignment.START : KvAlignment.END;
        } catch (IOException | RuntimeException e) {
            throw new ModelLoadException("Cannot read the graph of " + modelFile + ": " + e.getMessage(), e);
        }
    }

    static boolean hasOp(Path modelFile, String opType) throws IOException {
        boolean[] found = {false};
        graphs(modelFile, graph -> found[0] = graphHasOp(graph, opType));
        return found[0];
    }

    /** Reads the model file's graph(s) with {@code reader} (within the graph's bytes) until it returns true or the file ends. */
    private static void graphs(Path modelFile, GraphReader reader) throws IOException {
        try (InputStream in = Files.newInputStream(modelFile)) {
            CodedInputStream model = CodedInputStream.newInstance(in);
            model.setSizeLimit(Integer.MAX_VALUE);
            while (true) {
                int tag = model.readTag();
                if (tag == 0) return;
                // ModelProto.graph = 7 (GraphProto)
                if (WireFormat.getTagFieldNumber(tag) == 7 && WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                    int limit = model.pushLimit(model.readRawVarint32());
                    boolean done = reader.read(model);
                    model.popLimit(limit);
                    if (done) return;
                } else if (!model.skipField(tag)) {
                    return;
                }
            }
        }
    }

    @FunctionalInterface
    private interface GraphReader {
        /** Reads a GraphProto's fields; true when nothing more is wanted. */
        boolean read(CodedInputStream graph) throws IOException;
    }

    private static boolean graphHasOp(CodedInputStream graph, String opType) throws IOException {
        while (!graph.isAtEnd()) {
            int tag = graph.readTag();
            if (WireFormat.getTagFieldNumber(tag) == 1 && WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                int limit = graph.pushLimit(graph.readRawVarint32());
                while (!graph.isAtEnd()) {
                    int t = graph.readTag();
                    if (WireFormat.getTagFieldNumber(t) == 4 && WireFormat.getTagWireType(t) == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                        if (opType.equals(graph.readStringRequireUtf8())) {
                            graph.popLimit(limit);
                            return true;
                        }
                    } else {
                        graph.skipField(t);
                    }
                }
                graph.popLimit(limit);
            } else {
                graph.skipField(tag);
            }
        }
        return false;
    }

    /**
     * The graph's inputs whose names end with {@code suffix} (LoRA inputs), with their shapes (a symbolic dimension as -1)
     * and element types; read from the graph's input list without loading the file's weights.
     */
    static java.util.Map<String, ai.onnx.proto.OnnxMl.ValueInfoProto> inputs(Path modelFile, java.util.function.Predicate<String> named) throws IOException {
        java.util.Map<String, ai.onnx.proto.OnnxMl.ValueInfoProto> out = new java.util.LinkedHashMap<>();
        graphs(modelFile, graph -> {
            while (!graph.isAtEnd()) {
                int t = graph.readTag();
                // GraphProto.input = 11 (ValueInfoProto); node lists and initializers (weights embedded in the file) are skipped
                if (WireFormat.getTagFieldNumber(t) == 11 && WireFormat.getTagWireType(t) == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
                    ai.onnx.proto.OnnxMl.ValueInfoProto v = ai.onnx.proto.OnnxMl.ValueInfoProto.parseFrom(graph.readBytes());
                    if (named.test(v.getName())) out.put(v.getName(), v);
                } else {
                    graph.skipField(t);
                }
            }
            return false;
        });
        return out;
    }
}
