package dev.ortserve.engine.attention;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;

import java.util.List;

/**
 * A graph of {@code layers} com.microsoft.GroupQueryAttention nodes on one decode position per row, each over its own
 * KV buffer: inputs q, k, v ([rows, 1, heads x head size], shared), pk{l} and pv{l} ([rows, kvHeads, capacity, head
 * size]), seqlens ([rows] int32) and total ([1] int32); outputs out{l}, prk{l}, prv{l}. For tests and the benchmark
 * that set the native library's op ({@code dev.ortserve}) beside it.
 */
public final class GqaGraph {

    private GqaGraph() {
    }

    public static ModelProto model(int layers, int rows, int heads, int kvHeads, int headDim, int capacity, int window, float softcap,
                                   float scale, boolean half) {
        return model(layers, rows, heads, kvHeads, headDim, capacity, window, softcap, scale, half, "com.microsoft");
    }

    /** The same graph with the attention nodes of {@code domain} (com.microsoft, or dev.ortserve for the native library's op). */
    public static ModelProto model(int layers, int rows, int heads, int kvHeads, int headDim, int capacity, int window, float softcap,
                                   float scale, boolean half, String domain) {
        return model(layers, rows, 1, heads, kvHeads, headDim, capacity, window, softcap, scale, half, domain);
    }

    /** The same with {@code steps} new positions per row (1: a decode step; more: a prompt's chunk, one row). */
    public static ModelProto model(int layers, int rows, int steps, int heads, int kvHeads, int headDim, int capacity, int window, float softcap,
                                   float scale, boolean half, String domain) {
        int type = half ? TensorProto.DataType.FLOAT16_VALUE : TensorProto.DataType.FLOAT_VALUE;
        GraphProto.Builder graph = GraphProto.newBuilder().setName("gqa")
                .addInput(value("q", type, rows, steps, heads * headDim))
                .addInput(value("k", type, rows, steps, kvHeads * headDim)).addInput(value("v", type, rows, steps, kvHeads * headDim))
                .addInput(value("seqlens", TensorProto.DataType.INT32_VALUE, rows)).addInput(value("total", TensorProto.DataType.INT32_VALUE, 1));
        for (int l = 0; l < layers; l++) {
            graph.addNode(NodeProto.newBuilder().setOpType("GroupQueryAttention").setDomain(domain)
                    .addAllInput(List.of("q", "k", "v", "pk" + l, "pv" + l, "seqlens", "total")).addAllOutput(List.of("out" + l, "prk" + l, "prv" + l))
                    .addAttribute(ints("num_heads", heads)).addAttribute(ints("kv_num_heads", kvHeads)).addAttribute(ints("local_window_size", window))
                    .addAttribute(floats("scale", scale)).addAttribute(floats("softcap", softcap)));
            graph.addInput(value("pk" + l, type, rows, kvHeads, capacity, headDim)).addInput(value("pv" + l, type, rows, kvHeads, capacity, headDim))
                    .addOutput(ValueInfoProto.newBuilder().setName("out" + l)).addOutput(ValueInfoProto.newBuilder().setName("prk" + l))
                    .addOutput(ValueInfoProto.newBuilder().setName("prv" + l));
        }
        return ModelProto.newBuilder().setIrVersion(8).setGraph(graph)
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain("").setVersion(17))
                .addOpsetImport(OperatorSetIdProto.newBuilder().setDomain(domain).setVersion(1)).build();
    }

    /** A graph input or output of a fixed shape. */
    public static ValueInfoProto value(String name, int type, long... dims) {
        TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
        for (long d : dims) shape.addDim(TensorShapeProto.Dimension.newBuilder().setDimValue(d));
        return ValueInfoProto.newBuilder().setName(name)
                .setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(type).setShape(shape))).build();
    }

    public static AttributeProto ints(String name, long v) {
        return AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.INT).setI(v).build();
    }

    private static AttributeProto floats(String name, float v) {
        return AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.FLOAT).setF(v).build();
    }
}
