/**
 * Writes `buf/validate/validate.proto` (protovalidate's rule definitions, which proto/partner/v1 imports)
 * into `node_modules/.protovalidate/proto`, a git-ignored folder that buf.yaml lists as a module.
 *
 * Why it is printed rather than read: like google/api and google/rpc, the file must come from an npm
 * package and never be copied into this repository, but no npm package ships the `.proto`:
 * `@bufbuild/protovalidate` (the validator the server runs) ships only generated JavaScript, and its
 * sources get the file from the Buf Schema Registry, which is not npm. That generated JavaScript embeds the
 * file's complete descriptor (messages, oneofs, extension ranges, reserved names and the predefined CEL
 * rules on every field), so this script prints it back as proto source. What buf compiles is therefore the
 * very descriptor the server's validator is built from; test/unit/protovalidate-proto.test.ts checks that
 * the copy generated into gen/ embeds it byte for byte.
 *
 * Runs on every `npm install` (the `prepare` script) and before `npm run generate`; it is quick and
 * idempotent. Usage: node scripts/protovalidate-proto.ts [output-root]
 */
import fs from "node:fs";
import path from "node:path";
import {
  type DescExtension,
  type DescMessage,
  getExtension,
  isFieldSet,
  type Message,
} from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import {
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
  FieldDescriptorProtoSchema,
  type FieldOptions,
  FieldOptionsSchema,
  FileOptionsSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from "@bufbuild/protobuf/wkt";
import { file_buf_validate_validate } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";

const root = path.resolve(import.meta.dirname, "..");
/** Where buf.yaml expects the module (see its comment). */
export const PROTOVALIDATE_MODULE = path.join(root, "node_modules/.protovalidate/proto");

const file = file_buf_validate_validate;
const proto = file.proto;
/** The exclusive end protoc records for `to max` in an extension range. */
const MAX_FIELD_NUMBER_EXCLUSIVE = 536870912;

const scalarNames: Partial<Record<Type, string>> = {
  [Type.DOUBLE]: "double",
  [Type.FLOAT]: "float",
  [Type.INT64]: "int64",
  [Type.UINT64]: "uint64",
  [Type.INT32]: "int32",
  [Type.FIXED64]: "fixed64",
  [Type.FIXED32]: "fixed32",
  [Type.BOOL]: "bool",
  [Type.STRING]: "string",
  [Type.BYTES]: "bytes",
  [Type.UINT32]: "uint32",
  [Type.SFIXED32]: "sfixed32",
  [Type.SFIXED64]: "sfixed64",
  [Type.SINT32]: "sint32",
  [Type.SINT64]: "sint64",
};

/** A protobuf string literal: quotes, backslashes and control characters escaped, the rest as UTF-8. */
function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += `\\${c.toString(8).padStart(3, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

function scalarText(v: unknown): string {
  if (typeof v === "string") return quote(v);
  if (v instanceof Uint8Array) return quote(String.fromCharCode(...v));
  if (typeof v === "number" && !Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  return String(v);
}

/** A message in the text format, as an option's aggregate value (`{ id: "…" expression: "…" }`). */
function textFormat(msg: ReflectMessage, indent: string): string {
  const lines: string[] = [];
  const inner = `${indent}  `;
  for (const f of msg.sortedFields) {
    if (!msg.isSet(f)) continue;
    const one = (v: unknown, kind: "scalar" | "enum" | "message") => {
      if (kind === "message") return `${inner}${f.name} ${textFormat(v as ReflectMessage, inner)}`;
      if (kind === "enum" && f.enum) {
        const value = f.enum.values.find((e) => e.number === v);
        return `${inner}${f.name}: ${value?.name ?? String(v)}`;
      }
      return `${inner}${f.name}: ${scalarText(v)}`;
    };
    switch (f.fieldKind) {
      case "list":
        for (const v of msg.get(f)) lines.push(one(v, f.listKind));
        break;
      case "map":
        throw new Error(`map field ${f.name} in an option value is not supported`);
      default:
        lines.push(one(msg.get(f as never), f.fieldKind));
    }
  }
  return `{\n${lines.join("\n")}\n${indent}}`;
}

/** This file's extensions of an options message, by field number. */
function extensionsOf(extendee: string): Map<number, DescExtension> {
  return new Map(file.extensions.filter((e) => e.extendee.typeName === extendee).map((e) => [e.number, e]));
}
const fieldExtensions = extensionsOf("google.protobuf.FieldOptions");

/** `[json_name = …, deprecated = true, (buf.validate.predefined) = {…}]`, or nothing. */
function fieldOptions(field: FieldDescriptorProto, indent: string): string {
  const opts: string[] = [];
  if (field.jsonName && field.jsonName !== defaultJsonName(field.name)) {
    opts.push(`json_name = ${quote(field.jsonName)}`);
  }
  const o: FieldOptions | undefined = field.options;
  if (o) {
    const r = reflect(FieldOptionsSchema, o);
    for (const f of r.sortedFields) {
      if (!r.isSet(f)) continue;
      if (f.fieldKind !== "scalar" && f.fieldKind !== "enum") {
        throw new Error(`field option ${f.name} of ${field.name} is not supported`);
      }
      opts.push(
        `${f.name} = ${f.fieldKind === "enum" ? f.enum.value[r.get(f) as number]?.name : scalarText(r.get(f))}`,
      );
    }
    for (const u of o.$unknown ?? []) {
      const ext = fieldExtensions.get(u.no);
      if (ext?.fieldKind !== "message") throw new Error(`unknown option ${u.no} on ${field.name}`);
      const value = getExtension(o, ext as DescExtension & { fieldKind: "message" }) as Message;
      opts.push(`(${ext.typeName}) = ${textFormat(reflect(ext.message as DescMessage, value), indent)}`);
    }
  }
  return opts.length ? ` [${opts.join(", ")}]` : "";
}

/** protoc's default JSON name: lowerCamelCase of the field name. */
function defaultJsonName(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function fieldLine(field: FieldDescriptorProto, indent: string, syntax: string, inOneof: boolean): string {
  let label = "";
  if (!inOneof) {
    if (field.label === Label.REPEATED) label = "repeated ";
    else if (field.label === Label.REQUIRED) label = "required ";
    else if (syntax === "proto2" || field.proto3Optional) label = "optional ";
  }
  const type =
    field.type === Type.MESSAGE || field.type === Type.ENUM ? field.typeName : scalarNames[field.type];
  if (!type) throw new Error(`field ${field.name}: type ${field.type} is not supported`);
  if (field.defaultValue) throw new Error(`field ${field.name}: defaults are not supported`);
  return `${indent}${label}${type} ${field.name} = ${field.number}${fieldOptions(field, indent)};`;
}

function reserved(
  ranges: { start: number; end: number }[],
  names: string[],
  indent: string,
  endInclusive: boolean,
): string[] {
  const out: string[] = [];
  const r = ranges.map((x) => {
    const last = endInclusive ? x.end : x.end - 1;
    return last === x.start ? String(x.start) : `${x.start} to ${last}`;
  });
  if (r.length) out.push(`${indent}reserved ${r.join(", ")};`);
  if (names.length) out.push(`${indent}reserved ${names.map(quote).join(", ")};`);
  return out;
}

function enumBlock(e: EnumDescriptorProto, indent: string): string[] {
  if (e.options && Object.keys(e.options).some((k) => k !== "$typeName" && k !== "uninterpretedOption")) {
    throw new Error(`enum ${e.name}: options are not supported`);
  }
  const inner = `${indent}  `;
  return [
    `${indent}enum ${e.name} {`,
    ...e.value.map((v) => `${inner}${v.name} = ${v.number};`),
    ...reserved(e.reservedRange, e.reservedName, inner, true),
    `${indent}}`,
  ];
}

function messageBlock(m: DescriptorProto, indent: string, syntax: string): string[] {
  if (m.extension.length) throw new Error(`message ${m.name}: nested extensions are not supported`);
  const inner = `${indent}  `;
  const out = [`${indent}message ${m.name} {`];
  const printedOneofs = new Set<number>();
  for (const field of m.field) {
    // Proto2 fields of the descriptor read as 0 when unset: ask for presence, not the value.
    const oneof = isFieldSet(field, FieldDescriptorProtoSchema.field.oneofIndex)
      ? field.oneofIndex
      : undefined;
    if (oneof !== undefined && !field.proto3Optional) {
      if (printedOneofs.has(oneof)) continue;
      printedOneofs.add(oneof);
      out.push(`${inner}oneof ${m.oneofDecl[oneof]?.name} {`);
      const members = m.field.filter(
        (x) => isFieldSet(x, FieldDescriptorProtoSchema.field.oneofIndex) && x.oneofIndex === oneof,
      );
      for (const f of members) {
        out.push(fieldLine(f, `${inner}  `, syntax, true));
      }
      out.push(`${inner}}`);
      continue;
    }
    out.push(fieldLine(field, inner, syntax, false));
  }
  for (const n of m.nestedType) out.push(...messageBlock(n, inner, syntax));
  for (const e of m.enumType) out.push(...enumBlock(e, inner));
  for (const x of m.extensionRange) {
    const end = x.end >= MAX_FIELD_NUMBER_EXCLUSIVE ? "max" : String(x.end - 1);
    out.push(`${inner}extensions ${x.start} to ${end};`);
  }
  out.push(...reserved(m.reservedRange, m.reservedName, inner, false));
  out.push(`${indent}}`);
  return out;
}

/** The proto source of the embedded `buf/validate/validate.proto`. */
export function printValidateProto(): string {
  const syntax = proto.syntax || "proto2";
  if (syntax !== "proto2" && syntax !== "proto3") throw new Error(`syntax ${syntax} is not supported`);
  const lines = [
    "// Printed by scripts/protovalidate-proto.ts from the descriptor embedded in @bufbuild/protovalidate.",
    "// Do not edit: it is rewritten on every npm install.",
    `syntax = "${syntax}";`,
    "",
    `package ${proto.package};`,
    "",
    ...proto.dependency.map(
      (d, i) => `import ${proto.publicDependency.includes(i) ? "public " : ""}${quote(d)};`,
    ),
    "",
  ];
  if (proto.options) {
    const r = reflect(FileOptionsSchema, proto.options);
    for (const f of r.sortedFields) {
      if (!r.isSet(f)) continue;
      if (f.fieldKind !== "scalar") throw new Error(`file option ${f.name} is not supported`);
      lines.push(`option ${f.name} = ${scalarText(r.get(f))};`);
    }
    if (proto.options.$unknown?.length) throw new Error("custom file options are not supported");
    lines.push("");
  }
  const extendees = [...new Set(proto.extension.map((x) => x.extendee))];
  for (const extendee of extendees) {
    lines.push(`extend ${extendee} {`);
    for (const x of proto.extension.filter((e) => e.extendee === extendee)) {
      lines.push(fieldLine(x, "  ", syntax, false));
    }
    lines.push("}", "");
  }
  for (const m of proto.messageType) lines.push(...messageBlock(m, "", syntax), "");
  for (const e of proto.enumType) lines.push(...enumBlock(e, ""), "");
  if (proto.service.length) throw new Error("services are not supported");
  return `${lines.join("\n").trimEnd()}\n`;
}

/** Writes the file under `moduleRoot` unless it already holds exactly this text. */
export function writeValidateProto(moduleRoot = PROTOVALIDATE_MODULE): string {
  const target = path.join(moduleRoot, proto.name);
  const text = printValidateProto();
  if (!fs.existsSync(target) || fs.readFileSync(target, "utf8") !== text) {
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, text);
  }
  return target;
}

if (import.meta.main) {
  const target = writeValidateProto(process.argv[2] ? path.resolve(process.argv[2]) : undefined);
  console.log(`wrote ${path.relative(root, target)} from @bufbuild/protovalidate's descriptor`);
}
