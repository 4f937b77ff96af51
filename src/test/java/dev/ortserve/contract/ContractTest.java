package dev.ortserve.contract;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.ortserve.ApiTest;
import io.quarkus.arc.Arc;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.ws.rs.Path;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The served contract is the contract, and every operation of it has an implementation. */
@QuarkusTest
class ContractTest extends ApiTest {

    static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

    @Test
    void servedOpenApiEqualsTheContractFile() throws Exception {
        JsonNode file = YAML.readTree(ContractValidationFilter.CONTRACT.toFile());
        String served = given().accept("application/yaml").get("/q/openapi").then().statusCode(200).extract().asString();
        JsonNode servedTree = YAML.readTree(served);
        assertEquals("", difference(file, servedTree, ""), "GET /q/openapi must serve openapi/openapi.yaml semantically unchanged");
        String servedJson = given().get("/q/openapi?format=json").then().statusCode(200).extract().asString();
        assertEquals("", difference(file, new ObjectMapper().readTree(servedJson), ""));
    }

    /** The first JSON pointer where two trees differ, or "" when they are equal. */
    static String difference(JsonNode a, JsonNode b, String at) {
        if (a.equals(b)) return "";
        if (a.isObject() && b.isObject()) {
            java.util.Set<String> names = new java.util.TreeSet<>();
            a.fieldNames().forEachRemaining(names::add);
            b.fieldNames().forEachRemaining(names::add);
            for (String name : names) {
                if (!a.has(name) || !b.has(name)) return at + "/" + name + (a.has(name) ? " missing in served" : " added in served: " + b.get(name));
                String d = difference(a.get(name), b.get(name), at + "/" + name);
                if (!d.isEmpty()) return d;
            }
        }
        if (a.isArray() && b.isArray() && a.size() == b.size()) {
            for (int i = 0; i < a.size(); i++) {
                String d = difference(a.get(i), b.get(i), at + "/" + i);
                if (!d.isEmpty()) return d;
            }
        }
        return at + ": " + a + " != " + b;
    }

    @Test
    void swaggerUiIsServed() {
        given().get("/q/swagger-ui/").then().statusCode(200);
    }

    @Test
    void everyOperationHasAnImplementingMethod() throws Exception {
        JsonNode paths = YAML.readTree(ContractValidationFilter.CONTRACT.toFile()).get("paths");
        List<String> missing = new ArrayList<>();
        int operations = 0;
        for (Iterator<Map.Entry<String, JsonNode>> it = paths.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> path = it.next();
            for (Iterator<Map.Entry<String, JsonNode>> ops = path.getValue().fields(); ops.hasNext(); ) {
                Map.Entry<String, JsonNode> op = ops.next();
                if (!op.getValue().has("operationId")) continue;
                operations++;
                String operationId = op.getValue().get("operationId").asText();
                String tag = op.getValue().get("tags").get(0).asText();
                Class<?> api = Class.forName("dev.ortserve.api.generated." + tag + "Api");
                Method method = null;
                for (Method m : api.getMethods()) if (m.getName().equals(operationId)) method = m;
                if (method == null) {
                    missing.add(operationId + ": not in the generated " + api.getSimpleName());
                    continue;
                }
                var beans = Arc.container().beanManager().getBeans(api);
                if (beans.isEmpty()) {
                    missing.add(operationId + ": no bean implements " + api.getSimpleName());
                    continue;
                }
                Class<?> impl = beans.iterator().next().getBeanClass();
                Method implemented = impl.getMethod(method.getName(), method.getParameterTypes());
                if (implemented.getDeclaringClass().isInterface()) {
                    missing.add(operationId + ": " + impl.getSimpleName() + " does not implement it");
                }
                assertTrue(api.isAnnotationPresent(Path.class));
            }
        }
        assertEquals(19, operations, "the contract's operations");
        assertTrue(missing.isEmpty(), String.join("\n", missing));
    }
}
