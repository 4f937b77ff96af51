package dev.ortserve.engine;

import ai.onnxruntime.NodeInfo;
import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.HashMap;
import java.util.Map;

/**
 * A vision-language model's image encoder ({@code vision_encoder.onnx} of the onnx-community
 * layout): frames of pixel values in, one row of features per image token out, in the order the
 * prompt's image tokens take them. Its pixel input is {@code [frames, 3, H, W]}, or
 * {@code [batch, frames, 3, H, W]} with a pixel attention mask (Idefics3, SmolVLM).
 *
 * @param imageTokenId the token the processor repeats where an image's features go
 */
public record VisionEncoder(OrtEnvironment environment, OrtSession session, int imageTokenId, String pixelInput, int pixelRank, String maskInput,
                            OnnxJavaType maskType, String output) implements AutoCloseable {

    /** The encoder in {@code session}, its inputs and output read from the graph. */
    public static VisionEncoder of(OrtEnvironment env, OrtSession session, int imageTokenId) throws OrtException {
        String pixels = null, mask = null;
        int rank = 0;
        OnnxJavaType maskType = OnnxJavaType.INT64;
        for (Map.Entry<String, NodeInfo> e : session.getInputInfo().entrySet()) {
            TensorInfo t = (TensorInfo) e.getValue().getInfo();
            if (e.getKey().equals("pixel_values")) {
                pixels = e.getKey();
                rank = t.getShape().length;
            } else if (e.getKey().equals("pixel_attention_mask")) {
                mask = e.getKey();
                maskType = t.type;
            } else {
                throw new ModelLoadException("The vision encoder has an input this server does not feed: " + e.getKey());
            }
        }
        if (pixels == null || (rank != 4 && rank != 5)) {
            throw new ModelLoadException("The vision encoder needs a pixel_values input of rank 4 or 5");
        }
        if (session.getOutputNames().size() != 1) throw new ModelLoadException("The vision encoder must have one output (the image features)");
        return new VisionEncoder(env, session, imageTokenId, pixels, rank, mask, maskType, session.getOutputNames().iterator().next());
    }

    /**
     * The features of {@code frames} frames of {@code height x width} pixel values (channels first): {@code tokens x hidden}
     * floats, row-major. One run at a time per model (the session is shared).
     */
    public synchronized Features encode(float[] pixels, int frames, int height, int width) throws OrtException {
        long[] shape = pixelRank == 5 ? new long[] {1, frames, 3, height, width} : new long[] {frames, 3, height, width};
        Map<String, OnnxTensor> in = new HashMap<>();
        try {
            in.put(pixelInput, OnnxTensor.createTensor(environment, FloatBuffer.wrap(pixels), shape));
            if (maskInput != null) {
                long[] maskShape = {1, frames, height, width};
                int n = frames * height * width;
                if (maskType == OnnxJavaType.BOOL) {
                    ByteBuffer ones = ByteBuffer.allocateDirect(n).order(ByteOrder.nativeOrder());
                    for (int i = 0; i < n; i++) ones.put((byte) 1);
                    ones.flip();
                    in.put(maskInput, OnnxTensor.createTensor(environment, ones, maskShape, OnnxJavaType.BOOL));
                } else {
                    long[] ones = new long[n];
                    java.util.Arrays.fill(ones, 1);
                    in.put(maskInput, OnnxTensor.createTensor(environment, java.nio.LongBuffer.wrap(ones), maskShape));
                }
            }
            try (OrtSession.Result result = session.run(in)) {
                OnnxTensor out = (OnnxTensor) result.get(0);
                long[] s = out.getInfo().getShape();
                int hidden = (int) s[s.length - 1];
                FloatBuffer values = out.getFloatBuffer();
                float[] features = new float[values.remaining()];
                values.get(features);
                return new Features(features, features.length / hidden, hidden);
            }
        } finally {
            in.values().forEach(OnnxTensor::close);
        }
    }

    /** An encoder's output: {@code tokens x hidden} floats. */
    public record Features(float[] values, int tokens, int hidden) {
    }

    @Override
    public void close() {
        try {
            session.close();
        } catch (OrtException ignored) {
            // closing twice: nothing left to free
        }
    }
}
