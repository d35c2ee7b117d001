// Test double of xilffs' ff.h (FatFs on the SD card): drive "0:/" is the directory the program runs in, each file
// read through stdio (host/zynq/main.cpp compiled here). Only what the host program calls.
#ifndef HDSE_STANDIN_FF_H
#define HDSE_STANDIN_FF_H
#include <cstdio>
#include <cstring>
#include <string>
typedef unsigned int UINT;
typedef unsigned char BYTE;
typedef char TCHAR;
typedef enum { FR_OK = 0, FR_DISK_ERR, FR_NO_FILE = 4 } FRESULT;
#define FA_READ 0x01
struct FATFS {};
struct FIL {
  std::FILE *f = nullptr;
};
inline FRESULT f_mount(FATFS *, const TCHAR *, BYTE) { return FR_OK; }
inline FRESULT f_open(FIL *fp, const TCHAR *path, BYTE) {
  std::string p(path);
  if (p.rfind("0:/", 0) == 0) p = p.substr(3);
  fp->f = std::fopen(p.c_str(), "rb");
  return fp->f ? FR_OK : FR_NO_FILE;
}
inline FRESULT f_read(FIL *fp, void *buff, UINT btr, UINT *br) {
  *br = (UINT)std::fread(buff, 1, btr, fp->f);
  return FR_OK;
}
inline FRESULT f_lseek(FIL *fp, unsigned long ofs) { return std::fseek(fp->f, (long)ofs, SEEK_SET) ? FR_DISK_ERR : FR_OK; }
inline FRESULT f_close(FIL *fp) {
  std::fclose(fp->f);
  fp->f = nullptr;
  return FR_OK;
}
#endif
