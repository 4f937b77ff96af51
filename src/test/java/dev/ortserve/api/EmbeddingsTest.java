package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.wire.union.EmbeddingVector;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasItem;
import static org.hamcrest.Matchers.hasSize;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** POST /v1/embeddings on the bundled all-MiniLM-L6-v2. */
@QuarkusTest
class EmbeddingsTest extends ApiTest {

    static final String EMBEDDING_MODEL = "all-minilm-l6-v2";

    @Test
    void floatAndBase64CarryTheSameVector() {
        JsonPath floats = json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":[\"first text\",\"a second, longer text\"]}")
                .post("/v1/embeddings").then().statusCode(200)
                .body("object", equalTo("list")).body("data", hasSize(2)).body("data[1].index", equalTo(1))
                .body("data[0].embedding", hasSize(384)).body("model", equalTo(EMBEDDING_MODEL))
                .extract().jsonPath();
        JsonPath base64 = json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":[\"first text\",\"a second, longer text\"],\"encoding_format\":\"base64\"}")
                .post("/v1/embeddings").then().statusCode(200).extract().jsonPath();
        for (int i = 0; i < 2; i++) {
            List<Float> expected = floats.getList("data[" + i + "].embedding", Float.class);
            float[] decoded = EmbeddingVector.decodeBase64(base64.getString("data[" + i + "].embedding"));
            assertEquals(expected.size(), decoded.length);
            for (int k = 0; k < decoded.length; k++) assertEquals(expected.get(k), decoded[k], "element " + k);
        }
        assertEquals(floats.getInt("usage.prompt_tokens"), floats.getInt("usage.total_tokens"));
    }

    @Test
    void listedAndCheckedByModelId() {
        given().get("/v1/models").then().statusCode(200).body("data.id", hasItem(EMBEDDING_MODEL));
        json().body("{\"model\":\"" + MODEL + "\",\"input\":\"x\"}").post("/v1/embeddings").then().statusCode(404)
                .body("error.code", equalTo("model_not_found"));
    }

    @Test
    void limitsAreExplicit() {
        json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":\"" + "word ".repeat(400) + "\"}").post("/v1/embeddings")
                .then().statusCode(400).body("error.param", equalTo("input")).body("error.code", equalTo("context_length_exceeded"));
        json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":\"" + "word ".repeat(400) + "\",\"truncate\":true}").post("/v1/embeddings")
                .then().statusCode(200).body("usage.prompt_tokens", equalTo(256));
        json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":\"x\",\"dimensions\":128}").post("/v1/embeddings")
                .then().statusCode(400).body("error.param", equalTo("dimensions"));
        json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":[\"ok\",\"\"]}").post("/v1/embeddings")
                .then().statusCode(400).body("error.param", equalTo("input"));
        json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":[[101, 99999999]]}").post("/v1/embeddings")
                .then().statusCode(400).body("error.param", equalTo("input"));
    }

    @Test
    void tokenIdInputs() {
        json().body("{\"model\":\"" + EMBEDDING_MODEL + "\",\"input\":[[101, 7592, 2088, 102], [101, 102]]}").post("/v1/embeddings")
                .then().statusCode(200).body("data", hasSize(2)).body("usage.prompt_tokens", equalTo(6));
    }
}
