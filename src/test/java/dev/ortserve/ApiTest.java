package dev.ortserve;

import dev.ortserve.contract.ContractValidationFilter;
import io.quarkus.test.common.QuarkusTestResource;
import io.restassured.RestAssured;
import io.restassured.specification.RequestSpecification;
import org.junit.jupiter.api.BeforeAll;

import static io.restassured.RestAssured.given;

/**
 * Base of the HTTP tests: the server runs the generated tiny model, and every REST Assured
 * exchange goes through the contract validation filter.
 */
@QuarkusTestResource(value = TinyModelResource.class, restrictToAnnotatedClass = false)
public abstract class ApiTest {

    public static final String MODEL = TinyModelResource.MODEL_ID;

    @BeforeAll
    static void validateAgainstContract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) {
            RestAssured.filters(ContractValidationFilter.get());
        }
    }

    protected static RequestSpecification json() {
        return given().contentType("application/json");
    }

    private static dev.ortserve.contract.ContractProxy proxy;

    /**
     * The base URL for a real client (an OpenAI SDK) that brings its own HTTP stack: a contract-
     * validating proxy in front of the server, so those exchanges are checked like RestAssured's.
     */
    protected static synchronized String contractChecked(java.net.URL server) {
        try {
            if (proxy == null) proxy = dev.ortserve.contract.ContractProxy.to(server.getProtocol() + "://" + server.getHost() + ":" + server.getPort());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return proxy.base();
    }

    @org.junit.jupiter.api.AfterEach
    void clientExchangesConformed() {
        synchronized (ApiTest.class) {
            if (proxy != null) {
                org.junit.jupiter.api.Assertions.assertEquals(java.util.List.of(), proxy.problems(), "contract violations seen by the proxy");
                org.junit.jupiter.api.Assertions.assertFalse(proxy.exchanges().isEmpty(), "the client went through the proxy");
            }
        }
    }

    @org.junit.jupiter.api.AfterAll
    static synchronized void closeProxy() {
        if (proxy != null) proxy.close();
        proxy = null;
    }
}
