package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import dev.ortserve.families.FamilyFixtures;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The head a transformers export stores a second time, found value for value in external data without
 * reading either tensor whole (at Qwen3-0.6B's size the two were 1.24 GB of heap at the start of a
 * quantized cold start): transformers' Qwen3 fixture written with external data, compared in bands of
 * a few rows; one value changed in the last band and it is not taken for the embedding. Within one model
 * load the comparison is made once.
 */
class TiedHeadTest {

    @TempDir
    Path dir;

    @Test
    void aStoredHeadInExternalDataIsComparedInBandsNeverReadWhole() throws Exception {
        Path source = FamilyFixtures.directory("qwen3");
        OnnxModelFile.write(OnnxModelFile.read(source.resolve("model.onnx")), source, dir, Map.of());
        int previous = TiedHead.bandBytes;
        TiedHead.bandBytes = 7 * 16 * 4; // hidden 16: bands of 7 rows, the last one shorter (151936 = 7 x 21705 + 1)
        try {
            Graph g = graph();
            TensorProto head = storedHead(g);
            long read = OnnxModelFile.bytesRead();
            assertEquals(1, TiedHead.apply(g));
            assertEquals(read, OnnxModelFile.bytesRead(), "no tensor read whole");
            NodeProto fused = g.graph.getNodeList().stream().filter(n -> n.getOpType().equals("FusedMatMul")).findFirst().orElseThrow();
            assertEquals("model.model.embed_tokens.weight", fused.getInput(1));
            assertTrue(g.initializer(head.getName()) == null, "the stored copy is gone");

            // the head's last value changed: no longer the embedding transposed
            changeLastValue(head);
            assertEquals(0, TiedHead.apply(graph()));
        } finally {
            TiedHead.bandBytes = previous;
        }
    }

    /**
     * Within one model load (the load check's segments, then the rewrite) the stored head is compared with the
     * embedding once: the second asks get the first's answer (here even after the file changed under it); a new
     * load compares afresh.
     */
    @Test
    void oneLoadComparesAStoredHeadOnce() throws Exception {
        Path source = FamilyFixtures.directory("qwen3");
        OnnxModelFile.write(OnnxModelFile.read(source.resolve("model.onnx")), source, dir, Map.of());
        GraphRewriter.oneLoad(() -> {
            try {
                Graph g = graph();
                TensorProto head = storedHead(g);
                assertEquals(1, TiedHead.apply(g));
                changeLastValue(head);
                assertEquals(1, TiedHead.apply(graph()), "this load's first answer");
                return null;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        assertEquals(0, TiedHead.apply(graph()), "a new load compares afresh");
    }

    private void changeLastValue(TensorProto head) throws Exception {
        OnnxModelFile.External x = OnnxModelFile.external(head);
        try (FileChannel ch = FileChannel.open(dir.resolve(x.location()), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(4);
            ch.read(b, x.offset() + x.length() - 4);
            b.flip();
            b.put(3, (byte) (b.get(3) ^ 0x01));
            ch.write(b, x.offset() + x.length() - 4);
        }
    }

    private Graph graph() throws Exception {
        ModelProto m = OnnxModelFile.read(dir.resolve("model.onnx"));
        return new Graph(m, dir);
    }

    /** The [hidden, vocab] initializer the head's MatMul reads, in external data. */
    private static TensorProto storedHead(Graph g) throws Exception {
        for (NodeProto n : g.graph.getNodeList()) {
            if (!n.getOpType().equals("MatMul")) continue;
            TensorProto t = g.initializer(n.getInput(1));
            if (t != null && t.getDimsCount() == 2 && t.getDims(1) == 151936) {
                assertTrue(OnnxModelFile.external(t) != null, "the head is in external data");
                return t;
            }
        }
        throw new AssertionError("no stored head");
    }
}
