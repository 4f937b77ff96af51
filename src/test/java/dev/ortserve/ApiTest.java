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
}
