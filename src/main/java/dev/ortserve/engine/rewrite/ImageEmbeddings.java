package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import com.google.protobuf.ByteString;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A vision-language export's text side as one decoder that takes token ids: the onnx-community
 * layout ships {@code embed_tokens.onnx} (input_ids to inputs_embeds) beside a decoder that takes
 * {@code inputs_embeds}; composed, the embedding runs inside the decoder's graph, and the image
 * tokens' embeddings are overwritten there by the vision encoder's features (the transformers
 * models' {@code masked_scatter}): two inputs, {@value #ROWS_INPUT} (int64 [n, 1], flat indices
 * into the pass's batch x sequence tokens) and {@value #FEATURES_INPUT} (float32 [n x hidden],
 * flat), empty in a pass without image tokens. So the engine runs it as any decoder: batching,
 * the KV cache and the graph rewrites see token ids as before.
 */
public final class ImageEmbeddings {

    public static final String ROWS_INPUT = "ortserve_image_rows";
    public static final String FEATURES_INPUT = "ortserve_image_features";
    private static final String EMBEDS = "inputs_embeds";
    private static final String PREFIX = "ortserve_embed/";

    private ImageEmbeddings() {
    }

    /**
     * Writes to {@code outDir} (model.onnx, with model.onnx.data where tensors are large) the decoder {@code decoderFile}
     * with the embedding {@code embedFile} in front of it; both files' external data must sit in their own directory.
     */
    public static Path compose(Path decoderFile, Path embedFile, Path outDir) throws IOException {
        if (!decoderFile.getParent().equals(embedFile.getParent())) {
            throw new IllegalArgumentException("the embedding and the decoder must be in one directory");
        }
        ModelProto decoder = OnnxModelFile.read(decoderFile);
        ModelProto embed = OnnxModelFile.read(embedFile);
        GraphProto d = decoder.getGraph();
        GraphProto e = embed.getGraph();
        ValueInfoProto embedsInput = d.getInputList().stream().filter(v -> v.getName().equals(EMBEDS)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException(decoderFile.getFileName() + " has no input " + EMBEDS));
        Set<String> initializers = new HashSet<>();
        e.getInitializerList().forEach(t -> initializers.add(t.getName()));
        List<ValueInfoProto> idsInputs = e.getInputList().stream().filter(v -> !initializers.contains(v.getName())).toList();
        if (idsInputs.size() != 1 || e.getOutputCount() != 1) {
            throw new IllegalArgumentException(embedFile.getFileName() + " must have one input (the token ids) and one output (their embeddings)");
        }
        long hidden = hidden(embedsInput, e.getOutput(0));
        String ids = idsInputs.get(0).getName();
        String textEmbeds = PREFIX + "text_embeds";
        Map<String, String> rename = new LinkedHashMap<>();
        rename.put(ids, ids);
        rename.put(e.getOutput(0).getName(), textEmbeds);

        GraphProto.Builder g = d.toBuilder().clearInput();
        g.addInput(idsInputs.get(0));
        for (ValueInfoProto v : d.getInputList()) if (!v.getName().equals(EMBEDS)) g.addInput(v);
        g.addInput(input(ROWS_INPUT, TensorProto.DataType.INT64_VALUE, "image_tokens", 1L));
        g.addInput(input(FEATURES_INPUT, TensorProto.DataType.FLOAT_VALUE, "image_features_flat"));
        for (TensorProto t : e.getInitializerList()) g.addInitializer(t.toBuilder().setName(name(t.getName(), rename)));
        g.clearNode();
        for (NodeProto n : e.getNodeList()) {
            NodeProto.Builder b = n.toBuilder().setName(PREFIX + n.getName());
            for (int i = 0; i < n.getInputCount(); i++) if (!n.getInput(i).isEmpty()) b.setInput(i, name(n.getInput(i), rename));
            for (int i = 0; i < n.getOutputCount(); i++) if (!n.getOutput(i).isEmpty()) b.setOutput(i, name(n.getOutput(i), rename));
            g.addNode(b);
        }
        // [batch, seq, hidden] -> [batch x seq, hidden], the image rows scattered over it, back to [batch, seq, hidden]
        String flatShape = PREFIX + "flat_shape", flat = PREFIX + "flat", features = PREFIX + "features", merged = PREFIX + "merged",
                shape = PREFIX + "shape";
        g.addInitializer(longs(flatShape, -1, hidden));
        g.addNode(node("Shape", PREFIX + "shape_of", List.of(textEmbeds), shape));
        g.addNode(node("Reshape", PREFIX + "flatten", List.of(textEmbeds, flatShape), flat));
        g.addNode(node("Reshape", PREFIX + "features_rows", List.of(FEATURES_INPUT, flatShape), features));
        g.addNode(node("ScatterND", PREFIX + "place_images", List.of(flat, ROWS_INPUT, features), merged));
        g.addNode(node("Reshape", PREFIX + "unflatten", List.of(merged, shape), EMBEDS));
        g.addAllNode(d.getNodeList());

        ModelProto.Builder out = decoder.toBuilder().setGraph(g).clearOpsetImport();
        Map<String, Long> opsets = new LinkedHashMap<>();
        for (ModelProto m : List.of(decoder, embed)) {
            for (OperatorSetIdProto o : m.getOpsetImportList()) opsets.merge(o.getDomain(), o.getVersion(), Math::max);
        }
        opsets.merge("", 13L, Math::max); // ScatterND, Reshape with -1
        opsets.forEach((domain, version) -> out.addOpsetImport(OperatorSetIdProto.newBuilder().setDomain(domain).setVersion(version)));
        out.setIrVersion(Math.max(decoder.getIrVersion(), embed.getIrVersion()));
        OnnxModelFile.write(out.build(), decoderFile.getParent(), outDir, Map.of(), true);
        return outDir.resolve("model.onnx");
    }

    private static long hidden(ValueInfoProto embedsInput, ValueInfoProto embedOutput) {
        for (ValueInfoProto v : List.of(embedsInput, embedOutput)) {
            TensorShapeProto shape = v.getType().getTensorType().getShape();
            if (shape.getDimCount() == 3 && shape.getDim(2).hasDimValue() && shape.getDim(2).getDimValue() > 0) return shape.getDim(2).getDimValue();
        }
        throw new IllegalArgumentException("the hidden size of " + EMBEDS + " is not a number in the graph");
    }

    private static String name(String name, Map<String, String> rename) {
        return rename.getOrDefault(name, PREFIX + name);
    }

    private static ValueInfoProto input(String name, int type, Object... dims) {
        TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
        for (Object dim : dims) {
            shape.addDim(dim instanceof Long l ? TensorShapeProto.Dimension.newBuilder().setDimValue(l)
                    : TensorShapeProto.Dimension.newBuilder().setDimParam((String) dim));
        }
        return ValueInfoProto.newBuilder().setName(name)
                .setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(type).setShape(shape))).build();
    }

    private static NodeProto node(String op, String name, List<String> inputs, String output) {
        return NodeProto.newBuilder().setOpType(op).setName(name).addAllInput(inputs).addOutput(output).build();
    }

    private static TensorProto longs(String name, long... values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 8).order(ByteOrder.LITTLE_ENDIAN);
        for (long v : values) b.putLong(v);
        return TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.INT64_VALUE).addDims(values.length)
                .setRawData(ByteString.copyFrom(b.array())).build();
    }
}
