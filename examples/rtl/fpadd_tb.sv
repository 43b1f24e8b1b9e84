// fpadd_tb exposes the lanes' arithmetic for fpadd_check.cpp.
module fpadd_tb import fpadd::*; (
  input  logic [31:0] a, b,
  input  logic [15:0] ha, hb,
  output logic [31:0] s,
  output logic [15:0] hs
);
  assign s = f32_add(a, b);
  assign hs = f16_add(ha, hb);
endmodule
