/*
 * Whether a text is exactly one JSON value: the exact validator's check for trailing content.
 *
 * spark_apps.validation.orders' exact path parses with try_parse_json, which stops after the first
 * value: `{...} }`, `{...}{"x":1}` and `{...}<vertical tab>` parsed as the order alone. This reads
 * the text with the same default Jackson JsonFactory (see OrderFastPath), skips the root value and
 * asks for one more token: end of input (JSON whitespace only) is one value; any further token or
 * character is trailing content.
 *
 * Compiled by `make jvm` into .jvm/spark-jars/order-validator.jar with OrderFastPath.
 */
package io.github.revenueplatform.validation;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.io.IOException;
import org.apache.spark.sql.api.java.UDF1;

/**
 * {@code UDF1<String, Boolean>}: true when the text is one JSON value followed by nothing but JSON
 * whitespace; false when the first value was read and anything else follows it; null for null
 * text or when the first value itself cannot be read (not JSON: try_parse_json says so).
 */
public final class SingleJsonValue implements UDF1<String, Boolean> {
  private static final long serialVersionUID = 1L;

  private static final JsonFactory JSON = new JsonFactory();

  @Override
  public Boolean call(String text) {
    if (text == null) {
      return null;
    }
    boolean firstValueRead = false;
    try (JsonParser parser = JSON.createParser(text)) {
      if (parser.nextToken() == null) {
        return null;
      }
      parser.skipChildren();
      firstValueRead = true;
      return parser.nextToken() == null;
    } catch (IOException | RuntimeException error) {
      // Before the end of the first value: not JSON (the parse says so). After it: garbage that is
      // not even a token. Nothing escapes: one record must never fail a batch (and every restart).
      return firstValueRead ? Boolean.FALSE : null;
    }
  }
}
