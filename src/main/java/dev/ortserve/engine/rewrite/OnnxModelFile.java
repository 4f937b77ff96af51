package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.StringStringEntryProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Reads an ONNX model with its external data (tensors stored beside the model file, as exports of
 * models over 2 GB and most onnx-community files do), and writes one back with every large
 * initializer in a single external data file.
 */
final class OnnxModelFile {

    /** Initializers larger than this go to the external data file when writing. */
    private static final int EXTERNAL_THRESHOLD = 1024;

    private OnnxModelFile() {
    }

    static ModelProto read(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            CodedInputStream coded = CodedInputStream.newInstance(in);
            coded.setSizeLimit(Integer.MAX_VALUE);
            return ModelProto.parseFrom(coded);
        }
    }

    /** The raw little-endian bytes of a tensor, from the model itself or its external data file. */
    static ByteString raw(TensorProto t, Path modelDir) throws IOException {
        if (t.getDataLocation() == TensorProto.DataLocation.EXTERNAL) {
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
            Path data = modelDir.resolve(location).normalize();
            if (!data.startsWith(modelDir.normalize())) throw new IOException("tensor " + t.getName() + " points outside the model directory");
            try (RandomAccessFile f = new RandomAccessFile(data.toFile(), "r")) {
                if (length < 0) length = f.length() - offset;
                byte[] bytes = new byte[Math.toIntExact(length)];
                f.seek(offset);
                f.readFully(bytes);
                return ByteString.copyFrom(bytes);
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

    /** A float32 tensor's values. */
    static float[] floats(TensorProto t, Path modelDir) throws IOException {
        FloatBuffer fb = raw(t, modelDir).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        float[] out = new float[fb.remaining()];
        fb.get(out);
        return out;
    }

    /**
     * Writes {@code model} as {@code dir/model.onnx} and {@code dir/model.onnx.data}: every
     * initializer larger than 1 KB (external ones from {@code sourceDir} included) goes to the data
     * file, so the model file stays small whatever the model's size.
     */
    static void write(ModelProto model, Path sourceDir, Path dir) throws IOException {
        Path dataFile = dir.resolve("model.onnx.data");
        ModelProto.Builder out = model.toBuilder();
        var graph = out.getGraphBuilder();
        long offset = 0;
        try (OutputStream data = Files.newOutputStream(dataFile)) {
            for (int i = 0; i < graph.getInitializerCount(); i++) {
                TensorProto t = graph.getInitializer(i);
                boolean external = t.getDataLocation() == TensorProto.DataLocation.EXTERNAL;
                ByteString bytes = external || t.getRawData().size() > EXTERNAL_THRESHOLD ? raw(t, sourceDir) : null;
                if (bytes == null) continue;
                long padding = (64 - offset % 64) % 64; // aligned, so the data file can be mapped
                data.write(new byte[(int) padding]);
                offset += padding;
                bytes.writeTo(data);
                graph.setInitializer(i, t.toBuilder().clearRawData().clearFloatData().clearExternalData()
                        .setDataLocation(TensorProto.DataLocation.EXTERNAL)
                        .addExternalData(entry("location", dataFile.getFileName().toString()))
                        .addExternalData(entry("offset", Long.toString(offset)))
                        .addExternalData(entry("length", Long.toString(bytes.size()))).build());
                offset += bytes.size();
            }
        }
        try (OutputStream o = Files.newOutputStream(dir.resolve("model.onnx"))) {
            out.build().writeTo(o);
        }
    }

    private static StringStringEntryProto entry(String key, String value) {
        return StringStringEntryProto.newBuilder().setKey(key).setValue(value).build();
    }
}
