package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import com.google.protobuf.ByteString;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Set;

/**
 * The head runs on the last position of each row only. Plain exports compute logits for every
 * position, which costs the head's whole matrix work per prompt token and positions x vocabulary of
 * memory (1.2 GB for 2,000 tokens at a 152k vocabulary); the engine only ever reads each row's last
 * position.
 * <ul>
 * <li>Left-padded graphs (Optimum exports): every row ends at the pass's last column, so a
 * Gather(axis 1, index -1) on the hidden states before the head's MatMul.</li>
 * <li>Right-padded graphs (GroupQueryAttention, the genai builder's): a row ends where its tokens
 * do, so the graph gets an input {@value #LAST_COLUMNS_INPUT} (int64 [batch, columns, 1], the
 * columns whose logits the engine reads, which it fills: each row's last one, or the last few of a
 * speculative verification pass) and a GatherND(batch_dims 1) picks those columns per row.</li>
 * </ul>
 * The logits become [batch, 1, vocabulary] (left-padded) or [batch, columns, vocabulary] (right-padded).
 */
final class LastPositionLogits {

    /** Ops that may sit between the head and the logits output (Gemma's soft-capping, casts). */
    private static final Set<String> ELEMENTWISE = Set.of("Cast", "Div", "Mul", "Tanh", "Add", "Sub", "Identity");
    private static final Set<String> HEADS = Set.of("MatMul", "MatMulNBits");

    /** The input a right-padded graph gets: each row's last column, int64 [batch, 1, 1]. */
    static final String LAST_COLUMNS_INPUT = "ortserve_last_columns";
    /** The symbolic size of that input's second dimension: how many columns per row a pass reads logits of. */
    private static final String LOGIT_COLUMNS = "ortserve_logit_columns";

    private LastPositionLogits() {
    }

    /**
     * Applies the rewrite; returns null when done, else why the graph does not allow it.
     *
     * @param rightPadded rows start at column 0 and end where their tokens do (GroupQueryAttention graphs)
     */
    static String apply(Graph g, String logits, boolean rightPadded) {
        int index = g.producerIndex(logits);
        while (index >= 0 && ELEMENTWISE.contains(g.graph.getNode(index).getOpType())) {
            NodeProto n = g.graph.getNode(index);
            String next = null;
            for (String in : n.getInputList()) {
                if (g.initializer(in) != null || isConstant(g, in)) continue;
                if (next != null) return "the logits come from more than one computed input at " + n.getOpType() + " " + n.getName();
                next = in;
            }
            if (next == null) return "no head found before the logits";
            index = g.producerIndex(next);
        }
        if (index < 0 || !HEADS.contains(g.graph.getNode(index).getOpType())) {
            return "the logits are not computed by a MatMul head" + (index < 0 ? "" : " (" + g.graph.getNode(index).getOpType() + ")");
        }
        NodeProto head = g.graph.getNode(index);
        String hidden = g.unique("ortserve_last_hidden");
        NodeProto gather;
        if (rightPadded) {
            if (g.producerIndex(LAST_COLUMNS_INPUT) >= 0 || g.graph.getInputList().stream().anyMatch(i -> i.getName().equals(LAST_COLUMNS_INPUT))) {
                return "the graph already has an input or value named " + LAST_COLUMNS_INPUT;
            }
            g.graph.addInput(ValueInfoProto.newBuilder().setName(LAST_COLUMNS_INPUT).setType(TypeProto.newBuilder()
                    .setTensorType(TypeProto.Tensor.newBuilder().setElemType(TensorProto.DataType.INT64_VALUE)
                            .setShape(TensorShapeProto.newBuilder()
                                    .addDim(TensorShapeProto.Dimension.newBuilder().setDimParam("batch_size"))
                                    .addDim(TensorShapeProto.Dimension.newBuilder().setDimParam(LOGIT_COLUMNS))
                                    .addDim(TensorShapeProto.Dimension.newBuilder().setDimValue(1))))));
            // data [batch, columns, hidden], indices [batch, m, 1] -> [batch, m, hidden]
            gather = NodeProto.newBuilder().setOpType("GatherND").setName(g.unique("ortserve_last_position_gather"))
                    .addInput(head.getInput(0)).addInput(LAST_COLUMNS_INPUT).addOutput(hidden)
                    .addAttribute(Graph.intAttribute("batch_dims", 1)).build();
        } else {
            String indices = g.unique("ortserve_last_position");
            ByteBuffer minusOne = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(-1);
            g.graph.addInitializer(TensorProto.newBuilder().setName(indices).setDataType(TensorProto.DataType.INT64_VALUE)
                    .addDims(1).setRawData(ByteString.copyFrom(minusOne.array())));
            gather = NodeProto.newBuilder().setOpType("Gather").setName(g.unique("ortserve_last_position_gather"))
                    .addInput(head.getInput(0)).addInput(indices).addOutput(hidden).addAttribute(Graph.intAttribute("axis", 1)).build();
        }
        g.graph.setNode(index, head.toBuilder().setInput(0, hidden).build());
        g.graph.addNode(index, gather);
        for (int i = 0; i < g.graph.getOutputCount(); i++) {
            ValueInfoProto o = g.graph.getOutput(i);
            if (o.getName().equals(logits) && o.getType().getTensorType().getShape().getDimCount() == 3) {
                ValueInfoProto.Builder b = o.toBuilder();
                TensorShapeProto.Dimension columns = rightPadded ? TensorShapeProto.Dimension.newBuilder().setDimParam(LOGIT_COLUMNS).build()
                        : TensorShapeProto.Dimension.newBuilder().setDimValue(1).build();
                b.getTypeBuilder().getTensorTypeBuilder().getShapeBuilder().setDim(1, columns);
                g.graph.setOutput(i, b);
            }
        }
        return null;
    }

    private static boolean isConstant(Graph g, String name) {
        int p = g.producerIndex(name);
        return p >= 0 && g.graph.getNode(p).getOpType().equals("Constant");
    }
}
