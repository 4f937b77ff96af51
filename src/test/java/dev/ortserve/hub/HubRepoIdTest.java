package dev.ortserve.hub;

import org.junit.jupiter.api.Test;

import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** What ORTSERVE_MODEL_PATH values are Hub ids, and how their revision and subfolder are read. */
class HubRepoIdTest {

    @Test
    void readsOwnerNameRevisionAndSubfolder() {
        assertEquals(Optional.of(new HubRepoId("onnx-community/Qwen2.5-0.5B-Instruct", "main", "")), HubRepoId.parse("onnx-community/Qwen2.5-0.5B-Instruct"));
        assertEquals(Optional.of(new HubRepoId("acme/tiny", "v1.0", "")), HubRepoId.parse("acme/tiny@v1.0"));
        assertEquals(Optional.of(new HubRepoId("microsoft/Phi-3-mini-4k-instruct-onnx", "main", "cpu_and_mobile/cpu-int4-rtn-block-32")),
                HubRepoId.parse("microsoft/Phi-3-mini-4k-instruct-onnx@main:cpu_and_mobile/cpu-int4-rtn-block-32"));
        assertEquals(Optional.of(new HubRepoId("acme/tiny", "refs/pr/3", "")), HubRepoId.parse("acme/tiny@refs/pr/3"));
        assertEquals("models--onnx-community--Qwen2.5-0.5B-Instruct", HubRepoId.parse("onnx-community/Qwen2.5-0.5B-Instruct").orElseThrow().cacheFolderName());
        assertEquals("acme/tiny@main:sub", new HubRepoId("acme/tiny", "main", "sub").toString());
        assertEquals("acme/tiny", new HubRepoId("acme/tiny", "main", "").toString());
    }

    @Test
    void pathsAreNotHubIds() {
        for (String path : new String[] {"/models/qwen", "./qwen/onnx", "qwen", "a/b/c", "../up/model", "~/models", "C:\\models\\x",
                "acme/..", "acme/-bad", "acme/a--b", "acme/tiny@", "acme/tiny@../x", ""}) {
            assertEquals(Optional.empty(), HubRepoId.parse(path), path);
        }
    }
}
